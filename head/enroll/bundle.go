package enroll

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"slices"

	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// bundle issues the node certificate and builds the 200 answer of step 9.
func (s *Server) bundle(req *wire.EnrollRequest, c wire.Candidate) (wire.EnrollResponse, string, error) {
	ip, err := netip.ParseAddr(c.PublicIP)
	if err != nil {
		return wire.EnrollResponse{}, "", fmt.Errorf("issue node cert: public ip: %w", err)
	}
	is, err := s.cfg.CA.IssueNode(s.cfg.Rand, pki.NodeRequest{InstanceID: c.InstanceID, PublicIP: ip, Now: s.cfg.Now()})
	if err != nil {
		return wire.EnrollResponse{}, "", err
	}
	nt := s.cfg.NodeTypes[c.NodeType]
	ports := AssignPorts(req.Ports)
	b := s.cfg.Bundle
	res := nt.Resources
	if res == nil {
		res = map[string]float64{}
	}
	labels := nt.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	resp := wire.EnrollResponse{
		Version:      wire.Version,
		NodeCert:     string(is.CertPEM),
		NodeKey:      string(is.KeyPEM.Reveal()),
		CACert:       string(s.cfg.CA.CertPEM),
		ClusterToken: b.ClusterToken.Reveal(),
		AppID:        b.AppID,
		AppRootKey:   base64.StdEncoding.EncodeToString(b.AppRootKey.Reveal()),
		CandidateID:  c.CandidateID,
		NodeType:     c.NodeType,
		Shim:         b.Shim,
		Ray: wire.RayParams{
			HeadAddress:              b.RayHeadAddress,
			NodeIPAddress:            c.PublicIP,
			NodeName:                 c.InstanceID,
			NodeManagerPort:          ports.NodeManager,
			ObjectManagerPort:        ports.ObjectManager,
			RuntimeEnvAgentPort:      ports.RuntimeEnvAgent,
			DashboardAgentGRPCPort:   ports.DashboardAgentGRPC,
			DashboardAgentListenPort: ports.DashboardAgentListen,
			MetricsExportPort:        ports.MetricsExport,
			WorkerPorts:              ports.Workers,
			NumGPUs:                  nt.GPUs,
			NumCPUs:                  numCPUs(nt, len(ports.Workers)),
			Resources:                res,
			Labels:                   labels,
		},
		GuestAPI:  wire.GuestAPIGrant{Port: ports.GuestAPI, GuestAPIPolicy: b.GuestAPI},
		Heartbeat: wire.HeartbeatParams{Port: b.PortB, IntervalS: b.IntervalS, UnheardLimitS: b.UnheardLimitS, SelfEnd: b.SelfEnd},
		Mesh:      &wire.MeshGrant{Port: ports.Mesh},
	}
	return resp, is.Serial, nil
}

// numCPUs is the head's --num-cpus cap: the node type's cpus where set,
// else the worker ports minus 4. Every Ray worker and driver takes one
// worker port, and an empty pool fails with "No available ports"
// (src/ray/raylet/worker_pool.cc), so Ray must not size its pool from the
// host's CPUs; 4 ports stay for drivers and actors beyond the CPU count.
func numCPUs(nt wire.NodeType, workers int) int {
	if nt.CPUs > 0 {
		return nt.CPUs
	}
	return max(workers-4, 1)
}

// Ports is how a candidate's 64 ports are used.
type Ports struct {
	NodeManager, ObjectManager, RuntimeEnvAgent int
	DashboardAgentGRPC, DashboardAgentListen    int
	MetricsExport, GuestAPI, Mesh               int
	Workers                                     []int
}

// AssignPorts gives the lowest eight of the (validated, distinct) ports to
// Ray's fixed services, the guest API and the mesh, the rest to Ray workers.
func AssignPorts(in []int) Ports {
	p := slices.Clone(in)
	slices.Sort(p)
	return Ports{
		NodeManager: p[0], ObjectManager: p[1], RuntimeEnvAgent: p[2],
		DashboardAgentGRPC: p[3], DashboardAgentListen: p[4],
		MetricsExport: p[5], GuestAPI: p[6], Mesh: p[7], Workers: p[8:],
	}
}
