package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/vastnet"
)

// guardListeners is guardjob.py's GUARD line.
type guardListeners struct {
	NodeIP  string            `json:"node_ip"`
	Private string            `json:"private"`
	Ports   map[string]int    `json:"ports"`
	Local   map[string]string `json:"local"`
	Preload string            `json:"preload"`
}

// cotenantInRayActor (issue 41): listeners opened inside a Ray actor on a
// node (torch's TCPStore in C++, Python IPv4 and dual-stack IPv6, all
// outside the node's 64) answer the node's own ranks but no co-tenant: a
// container on the node's bridge (the cluster's Docker network, where a
// vast host's other rentals sit) dials each at the node's private address
// and is reset or unanswered, and the actor's Python listeners never see
// it. Docker's default capabilities leave Ray's workers without
// CAP_NET_ADMIN, as on rentals, so this holds by the shim's accept check,
// not only its socket filter. The control, a listener made by raw
// syscalls that no preloaded library sees, serves the same co-tenant: the
// path is there and the guard is what shuts it.
func cotenantInRayActor(t *testing.T, c *rayCluster, image string) {
	gate := filepath.Join(t.TempDir(), "gate")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.head, "run", "--state", c.state, "--", "python",
		filepath.Join(suite.repo, "test", "e2e", "testdata", "guardjob.py"), gate)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	defer func() { os.WriteFile(gate, nil, 0o600); cmd.Wait() }()
	lines := make(chan string, 1000)
	var out strings.Builder
	go func() {
		for s := bufio.NewScanner(pr); s.Scan(); {
			lines <- s.Text()
		}
		close(lines)
	}()
	next := func(prefix string) string {
		for l := range lines {
			out.WriteString(l + "\n")
			if j, ok := strings.CutPrefix(l, prefix+" "); ok {
				return j
			}
		}
		t.Fatalf("guardjob.py ended without %s:\n%s", prefix, out.String())
		return ""
	}
	var g guardListeners
	if err := json.Unmarshal([]byte(next("GUARD")), &g); err != nil {
		t.Fatalf("GUARD: %v", err)
	}
	t.Logf("listeners in a Ray actor on %s (private %s, LD_PRELOAD %q): %v", g.NodeIP, g.Private, g.Preload, g.Ports)
	for name, want := range map[string]string{"python4": "hi " + g.Private, "python6": "hi ::ffff:" + g.Private, "control": "hi " + g.Private} {
		if g.Local[name] != want {
			t.Errorf("the actor dialling its own %s listener at %s: %q, want %q (the node's own ranks must be served)", name, g.Private, g.Local[name], want)
		}
	}
	var ports []int
	for _, p := range g.Ports {
		ports = append(ports, p)
	}
	got := cotenantDial(t, c, image, g.Private, ports)
	for name, p := range g.Ports {
		switch v := got[p]; {
		case name == "control" && v != "served":
			t.Fatalf("control: the co-tenant does not reach the actor's raw listener %s:%d (%s): the test's network lacks the shared bridge", g.Private, p, v)
		case name != "control" && v != "shut" && v != "unanswered":
			t.Errorf("the co-tenant reached the actor's %s listener %s:%d: %s", name, g.Private, p, v)
		default:
			t.Logf("co-tenant → %s %s:%d: %s", name, g.Private, p, v)
		}
	}
	os.WriteFile(gate, nil, 0o600)
	var seen map[string][]string
	if err := json.Unmarshal([]byte(next("GUARDDONE")), &seen); err != nil {
		t.Fatalf("GUARDDONE: %v", err)
	}
	for _, name := range []string{"python4", "python6"} {
		for _, who := range seen[name] {
			if !strings.HasSuffix(who, g.Private) && !strings.HasPrefix(who, "127.") && who != "::1" {
				t.Errorf("the actor's %s listener accepted %s, from outside the container", name, who)
			}
		}
	}
}

// cotenantDial runs a co-tenant, a container on the cluster's bridge but
// no rental of the cluster, that dials ip at each port and says for each:
// "served" (the listener wrote to it), "held" (connected, the listener
// keeps it open: reached), "shut" (reset or closed unread), "unanswered"
// (the SYN got no answer) or the error.
func cotenantDial(t *testing.T, c *rayCluster, image, ip string, ports []int) map[int]string {
	code := `import socket, sys
for p in sys.argv[2:]:
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((sys.argv[1], int(p)))
    except socket.timeout:
        print(p, "unanswered"); continue
    except OSError as e:
        print(p, "shut" if e.errno == 104 else type(e).__name__); continue
    try:
        print(p, "served" if s.recv(64).startswith(b"hi ") else "shut")
    except socket.timeout:
        print(p, "held")
    except ConnectionResetError:
        print(p, "shut")
    s.close()
`
	args := []string{"run", "--rm", "--network", vastnet.NetworkName(c.name), "--label", vastnet.LabelCluster + "=" + c.name,
		"--entrypoint", "/usr/bin/python3", image, "-c", code, ip}
	for _, p := range ports {
		args = append(args, fmt.Sprint(p))
	}
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("co-tenant: %v\n%s", err, out)
	}
	got := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var p int
		var what string
		if n, _ := fmt.Sscan(l, &p, &what); n == 2 {
			got[p] = what
		}
	}
	return got
}
