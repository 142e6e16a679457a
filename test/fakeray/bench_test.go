package fakeray_test

import (
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkStartToStarted: how long the stand-in's whole tree takes from
// exec to "fakeray started" (every child bound, connected, registered),
// beside a bare Python start measured in the same run as the reference:
//
//	go test -run '^$' -bench StartToStarted -benchtime 10x ./test/fakeray
func BenchmarkStartToStarted(b *testing.B) {
	b.Run("bare_python", func(b *testing.B) {
		py, err := exec.LookPath("python3")
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			if out, err := exec.Command(py, "-c", "pass").CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	b.Run("ray_start_block", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			n := newNode(b, "127.0.0.1", 3)
			env := secrets(b)
			b.StartTimer()
			f := run(b, "", env, nil, n.args()...)
			f.expect(b, "fakeray started")
			b.StopTimer()
			syscall.Kill(f.cmd.Process.Pid, syscall.SIGTERM)
			f.wait(b)
			b.StartTimer()
		}
	})
}
