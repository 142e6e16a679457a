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
		Shim:         b.Shim,
		Ray: wire.RayParams{
			HeadAddress:              b.RayHeadAddress,
			NodeIPAddress:            c.PublicIP,
			NodeManagerPort:          ports.NodeManager,
			ObjectManagerPort:        ports.ObjectManager,
			RuntimeEnvAgentPort:      ports.RuntimeEnvAgent,
			DashboardAgentGRPCPort:   ports.DashboardAgentGRPC,
			DashboardAgentListenPort: ports.DashboardAgentListen,
			MetricsExportPort:        ports.MetricsExport,
			WorkerPorts:              ports.Workers,
			NumGPUs:                  nt.GPUs,
			Resources:                res,
			Labels:                   labels,
		},
		GuestAPI:  wire.GuestAPIGrant{Port: ports.GuestAPI, GuestAPIPolicy: b.GuestAPI},
		Heartbeat: wire.HeartbeatParams{Port: b.PortB, IntervalS: b.IntervalS},
	}
	return resp, is.Serial, nil
}

// Ports is how a candidate's 64 ports are used.
type Ports struct {
	NodeManager, ObjectManager, RuntimeEnvAgent int
	DashboardAgentGRPC, DashboardAgentListen    int
	MetricsExport, GuestAPI                     int
	Workers                                     []int
}

// AssignPorts gives the lowest seven of the (validated, distinct) ports to
// Ray's fixed services and the guest API, the rest to Ray workers.
func AssignPorts(in []int) Ports {
	p := slices.Clone(in)
	slices.Sort(p)
	return Ports{
		NodeManager: p[0], ObjectManager: p[1], RuntimeEnvAgent: p[2],
		DashboardAgentGRPC: p[3], DashboardAgentListen: p[4],
		MetricsExport: p[5], GuestAPI: p[6], Workers: p[7:],
	}
}
