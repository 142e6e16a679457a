package e2e

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestHeadMachineNoneNewest and TestHeadMachineNoneOldest (issue 29): with
// provider none (the user rents; the head only hears of rentals through
// its admin API) and real Ray, a stranger routed to the head's IP tries
// every port the head's machine listens on there, with the firewall off
// and on: a job through any job route (the dashboard's job API and the
// dashboard agent's job agent, which Ray 2.52 serves with no token),
// Ray's metrics, a runtime env, gRPC with no certificate or another CA's.
// Nothing may answer; with the firewall on, none of the cluster's ports
// may even connect. The head's IP is on this machine's loopback interface
// (no Docker network: nothing of the docker provider runs), as a head with
// a public address has it on its own interface. The control: from this
// machine the Ray head's job API answers the cluster token, so the doors
// the stranger found shut are open to the cluster; the cluster token is
// in none of the head's logs.
func TestHeadMachineNoneNewest(t *testing.T) { testHeadMachineNone(t, rvtest.RayNewest) }

// TestHeadMachineNoneOldest is TestHeadMachineNoneNewest with the oldest
// supported Ray: the one whose dashboard agent asks no token of a job.
func TestHeadMachineNoneOldest(t *testing.T) { testHeadMachineNone(t, rvtest.RayOldest) }

func testHeadMachineNone(t *testing.T, version string) {
	rvtest.NeedRoot(t, "ip", "iptables", "nft")
	for _, fw := range []string{"off", "on"} {
		t.Run("firewall "+fw, func(t *testing.T) {
			c := startRayClusterEdit(t, version, 0, 1, func(cfg map[string]any) {
				cfg["provider"] = map[string]any{"kind": "none"}
				headIP, _, _ := net.SplitHostPort(cfg["ray"].(map[string]any)["head_address"].(string))
				dummyAddress(t, headIP)
			}, "--firewall", fw)
			c.waitRayHeadSettled(t, 3*time.Minute)
			if fw == "on" && !strings.Contains(c.out.String(), "firewall: on") {
				t.Fatalf("head up --firewall on did not say its firewall is on:\n%s", c.out.String())
			}
			files := rayHeadFilesOf(t, c.state)
			targets, _ := c.headTargets(t)
			s := newStranger(t, c.headIP)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cs := []creds{{name: "no client cert"}, {name: "cert of another CA", cert: foreignCert(t, strangerIP)}}
			if judgeHeadMachine(t, probeAll(ctx, s.dial, targets, cs), func(string) bool { return fw == "on" }) == 0 {
				t.Fatal("no port of the cluster's at the head's IP: the probe saw nothing to judge")
			}
			c.jobAPIControl(ctx, t, files.token)
			checkNoSecret(t, c, files.token)
		})
	}
}

// TestHeadMachineNoneWithNodes (issue 29, the control with nodes): with
// provider none and --firewall on, two nodes that the user rents by hand
// (here through the docker provider's package on vast's network rebuilt
// locally, driven as an external tool would: POST /v1/candidates, rent
// with the returned env and bootloader.sh, PATCH the instance's id and
// public IP) enroll, start Ray, run a task each and move a 20 MiB object
// between them, every door of the head's machine guarded by the firewall
// that follows the admin API's public IPs. Without it (a firewall that
// admits no candidate) the nodes never reach port A.
func TestHeadMachineNoneWithNodes(t *testing.T) {
	rvtest.NeedRoot(t, "ip", "iptables", "nft")
	version := rvtest.RayNewest
	image, _ := rayImage(t, version)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var p *docker.Provider
	c := startRayClusterEdit(t, version, 0, 2, func(cfg map[string]any) {
		cfg["provider"] = map[string]any{"kind": "none"}
		headIP, _, _ := net.SplitHostPort(cfg["ray"].(map[string]any)["head_address"].(string))
		// The user's renting tool: its network's gateway is the head's IP,
		// made before head up listens there.
		var err error
		p, err = docker.New(ctx, docker.Config{Engine: suite.eng, Cluster: cfg["cluster"].(string), HeadIP: headIP,
			Settings: docker.Settings{Image: image}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
	}, "--firewall", "on")
	c.waitRayHeadSettled(t, 3*time.Minute)
	if !strings.Contains(c.out.String(), "firewall: on") {
		t.Fatalf("head up --firewall on did not say its firewall is on:\n%s", c.out.String())
	}
	for range 2 {
		rentByHand(ctx, t, c, p)
	}
	c.waitRunning(2, 4*time.Minute)
	res, out := c.job(2, 2*time.Minute)
	checkJob(t, res, out, 2, version)
}

// rentByHand is what a user's own renting does for provider none: a
// candidate from the admin API, a rental with its env and bootloader.sh,
// then the rental's instance id, host and public IP told to the head.
func rentByHand(ctx context.Context, t *testing.T, c *rayCluster, p *docker.Provider) {
	t.Helper()
	created, err := c.admin.Create(ctx, wire.CandidateRequest{NodeType: safeType})
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Rent(ctx, providerRequest(created.CandidateID, created.Env))
	if err != nil {
		t.Fatal(err)
	}
	for r.PublicIP == "" {
		time.Sleep(200 * time.Millisecond)
		if r, err = p.Get(ctx, r.InstanceID); err != nil {
			t.Fatal(err)
		}
	}
	patch := wire.CandidatePatch{InstanceID: r.InstanceID, PublicIP: r.PublicIP, HostID: r.HostID}
	if _, err := c.admin.Patch(ctx, created.CandidateID, patch); err != nil {
		t.Fatal(err)
	}
	t.Logf("rented by hand: candidate %s, instance %s at %s", created.CandidateID, r.InstanceID, r.PublicIP)
}

// dummyAddress puts ip on this machine's loopback interface for the test:
// an address of this machine's own, as a head's public address is.
func dummyAddress(t *testing.T, ip string) {
	t.Helper()
	if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s/32 dev lo: %v: %s", ip, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run() })
}
