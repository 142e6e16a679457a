package bootloader_test

import (
	"os"
	"os/exec"
	"testing"
)

// BenchmarkBoot measures one bootloader run under dash from start to the
// agent's exit: Python probe, TLS download, hash, exec (fakeray's import ray
// is near free; real Ray's import adds seconds).
func BenchmarkBoot(b *testing.B) {
	if _, err := exec.LookPath("dash"); err != nil {
		b.Skip("dash not installed")
	}
	s := newSetup(b, pythons(b)[0])
	h := newHead(b, nil, serveBytes(s.agent))
	s.env["RAYVAST_PORT_A"] = h.port()
	b.ResetTimer()
	for b.Loop() {
		if r := run(b, []string{"dash"}, s.env); r.code != 0 {
			b.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		os.Remove(s.mark)
		os.RemoveAll(s.tmp) // the exec'd agent leaves its dir behind
		os.Mkdir(s.tmp, 0o700)
	}
}
