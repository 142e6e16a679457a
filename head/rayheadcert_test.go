package main

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestRayHeadCert proves the Ray head's files chain to the cluster CA, carry
// no instance URI (port B must never take them for a node), hold the cluster
// token in a 0600 file, and that the printed env names them; and that a
// second run refuses to overwrite.
func TestRayHeadCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := statedir.Init(statedir.Options{Dir: dir, IP: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ray")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ray-head-cert", "--state", dir, "--ip", "192.0.2.10", "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	st, err := statedir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(filepath.Join(out, "ray-head.crt"))
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: st.CA.Pool(), CurrentTime: time.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("ray head cert does not chain to the CA as a client: %v", err)
	}
	if err := cert.VerifyHostname("192.0.2.10"); err != nil {
		t.Errorf("no IP SAN for the Ray head: %v", err)
	}
	if len(cert.URIs) != 0 {
		t.Errorf("ray head cert carries URIs %v; port B would read an instance from it", cert.URIs)
	}
	keyPEM, _ := os.ReadFile(filepath.Join(out, "ray-head.key"))
	if _, err := pki.ParseKey(keyPEM); err != nil {
		t.Errorf("key: %v", err)
	}
	for name, want := range map[string]os.FileMode{"ray-head.key": 0o600, "cluster_token": 0o600, ".": 0o700} {
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v err %v, want %v", name, fi.Mode().Perm(), err, want)
		}
	}
	tok, _ := os.ReadFile(filepath.Join(out, "cluster_token"))
	if string(tok) != st.ClusterToken.Reveal() {
		t.Error("cluster_token file is not the cluster token")
	}
	env := stdout.String()
	for _, want := range []string{"RAY_USE_TLS=1", "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN_PATH=" + filepath.Join(out, "cluster_token"),
		"RAY_TLS_SERVER_CERT=" + filepath.Join(out, "ray-head.crt"), "RAY_TLS_SERVER_KEY=" + filepath.Join(out, "ray-head.key"),
		"RAY_TLS_CA_CERT=" + filepath.Join(out, "ca.crt")} {
		if !strings.Contains(env, want) {
			t.Errorf("printed env lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env+stderr.String(), st.ClusterToken.Reveal()) {
		t.Error("the cluster token was printed")
	}
	stdout.Reset()
	if code := run(t.Context(), []string{"ray-head-cert", "--state", dir, "--ip", "192.0.2.10", "--out", out}, &stdout, &stderr); code != 1 {
		t.Errorf("second run: exit %d, want 1 (no overwrite)", code)
	}
	if code := run(t.Context(), []string{"ray-head-cert", "--state", dir, "--ip", "nope", "--out", out}, &stdout, &stderr); code != 2 {
		t.Errorf("bad ip: exit %d, want 2", code)
	}
}

// TestStatusTable proves head status shows state, type, IP, age, last
// heartbeat and health in aligned columns.
func TestStatusTable(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hb := now.Add(-3 * time.Second)
	var b bytes.Buffer
	printStatus(&b, []wire.Candidate{{CandidateID: "c-1", NodeType: "a100", State: wire.StateRunning, PublicIP: "203.0.113.7", CreatedAt: now.Add(-90 * time.Second)}},
		[]wire.Node{{InstanceID: "i-1", NodeType: "a100", PublicIP: "203.0.113.7", State: wire.StateEnrolled, EnrolledAt: now.Add(-time.Hour),
			LastHeartbeat: &hb, Health: wire.HealthHealthy, Ray: wire.RayStatus{State: wire.RayRunning}}}, now)
	got := b.String()
	for _, want := range []string{"AGE", "1m30s", "1h0m0s", "3s ago", "healthy", "running", "203.0.113.7", "a100"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}
