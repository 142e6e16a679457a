package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// nftRecorder stands in for nft: it keeps every script (or refuses all
// with err).
type nftRecorder struct {
	mu      sync.Mutex
	scripts []string
	err     error
}

func (n *nftRecorder) run(_ context.Context, script string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.scripts = append(n.scripts, script)
	return n.err
}

func (n *nftRecorder) all() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.scripts, "\n")
}

func withNft(t *testing.T, n *nftRecorder) {
	old := headNft
	headNft = n.run
	t.Cleanup(func() { headNft = old })
}

// TestUpFirewallOnProviderNone: head up --firewall on with provider none
// (an external provider) makes the firewall table guarding ports A and B,
// says so, and opens it to a candidate's public_ip as soon as the admin
// API names it: the flag is honoured, not accepted and ignored. With no
// --firewall (auto) and no provider.private_network it does the same: an
// external provider's rentals are on a public network, so the default is
// the firewall on.
func TestUpFirewallOnProviderNone(t *testing.T) {
	t.Run("--firewall on", func(t *testing.T) { testUpFirewallNone(t, "--firewall", "on") })
	t.Run("by default", func(t *testing.T) { testUpFirewallNone(t) })
}

func testUpFirewallNone(t *testing.T, flags ...string) {
	dir := t.TempDir()
	needFakeray(t, filepath.Join(dir, "ray-record.json"))
	nft := &nftRecorder{}
	withNft(t, nft)
	cfg := upConfig(t, dir, rayAddr(t))
	if len(flags) == 0 { // the config says nothing of its network
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, bytes.Replace(b, []byte(`,"private_network":true`), nil, 1), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := startUp(t, append([]string{"--config", cfg, "--agent", os.Args[0], "--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0"}, flags...)...)
	r.waitFor(t, "the firewall line", func() bool { return strings.Contains(r.out.String(), "firewall: on (nftables table inet rayvast_") })
	st, err := statedir.Load(filepath.Join(dir, "cluster.state"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nft.all(), "chain input") || !strings.Contains(nft.all(), "table inet rayvast_") {
		t.Fatalf("no firewall table made:\n%s", nft.all())
	}
	admin := adminclient.Unix(st.Path(statedir.AdminSocket), 5*time.Second)
	req := wire.CandidateRequest{NodeType: "cpu", InstanceID: "ext-1", PublicIP: "198.51.100.23"}
	if _, err := admin.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the candidate's IP in the allowed set", func() bool { return strings.Contains(nft.all(), "198.51.100.23") })
	if code := r.stop(t); code != 0 {
		t.Errorf("head up exit %d:\n%s", code, r.errOut.String())
	}
}

// TestUpFirewallOnRefusedWithoutNft: where nftables cannot be driven,
// head up --firewall on (and head serve) exit 2 saying why, before any
// state dir or Ray head exists: never a cluster without its firewall.
func TestUpFirewallOnRefusedWithoutNft(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "ray-record.json")
	needFakeray(t, record)
	withNft(t, &nftRecorder{err: errors.New("nft: Operation not permitted")})
	cfg := upConfig(t, dir, rayAddr(t))
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"up", "--config", cfg, "--agent", os.Args[0], "--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0", "--firewall", "on"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "nftables cannot be used here") || !strings.Contains(errb.String(), "Operation not permitted") {
		t.Errorf("head up --firewall on without nftables: exit %d, want 2 with the reason:\n%s", code, errb.String())
	}
	if _, err := os.Stat(record); err == nil {
		t.Error("the Ray head started anyway")
	}
	if _, err := os.Stat(filepath.Join(dir, "cluster.state")); err == nil {
		t.Error("a state dir was made anyway")
	}
	for _, bad := range []string{"sometimes", ""} {
		errb.Reset()
		if code := run(context.Background(), []string{"up", "--config", cfg, "--firewall", bad}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "want on, off or auto") {
			t.Errorf("--firewall %q: exit %d:\n%s", bad, code, errb.String())
		}
	}
	// head serve alike (its state dir made by head init).
	state := filepath.Join(dir, "serve.state")
	if c := run(context.Background(), []string{"init", "--state", state, "--ip", "127.0.0.1"}, &out, &errb); c != 0 {
		t.Fatalf("head init: %d %s", c, errb.String())
	}
	errb.Reset()
	code = run(context.Background(), []string{"serve", "--state", state, "--config", cfg, "--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0", "--firewall", "on"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "nftables cannot be used here") {
		t.Errorf("head serve --firewall on without nftables: exit %d, want 2:\n%s", code, errb.String())
	}
}
