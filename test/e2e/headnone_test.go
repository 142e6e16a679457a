package e2e

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
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

// dummyAddress puts ip on this machine's loopback interface for the test:
// an address of this machine's own, as a head's public address is.
func dummyAddress(t *testing.T, ip string) {
	t.Helper()
	if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s/32 dev lo: %v: %s", ip, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run() })
}
