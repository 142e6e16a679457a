package rvtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUntil: a condition that comes true is seen; one that never does
// returns false once the limit has passed, not before.
func TestUntil(t *testing.T) {
	n := 0
	if !Until(5*time.Second, func() bool { n++; return n == 5 }) {
		t.Fatal("Until gave up on a condition true at the fifth poll")
	}
	if n != 5 {
		t.Errorf("polled %d times, want 5 (it stops when the condition holds)", n)
	}
	start := time.Now()
	if Until(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("gave up after %v, before the 30ms limit", d)
	}
}

// fatalRecorder catches WaitFor's failure instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper()                        {}
func (f *fatalRecorder) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

// TestWaitFor: nil from the condition passes; a condition that never holds
// fails the test with its last error.
func TestWaitFor(t *testing.T) {
	f := &fatalRecorder{TB: t}
	n := 0
	WaitFor(f, 5*time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if f.msg != "" {
		t.Errorf("WaitFor failed on a condition that came true: %s", f.msg)
	}
	WaitFor(f, 20*time.Millisecond, func() error { return errors.New("socket mode 0644") })
	if !strings.Contains(f.msg, "socket mode 0644") {
		t.Errorf("failure %q does not carry the last error", f.msg)
	}
}
