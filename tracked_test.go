package rayvast

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoCompiledFileTracked: no file git tracks is an ELF binary (a built
// loadtest of 11.8 MB was once committed at the root; build outputs belong
// in bin/, which .gitignore keeps out).
func TestNoCompiledFileTracked(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v)", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		fh, err := os.Open(f)
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := fh.Read(head)
		fh.Close()
		if bytes.Equal(head[:n], []byte("\x7fELF")) {
			t.Errorf("%s is an ELF binary tracked by git: build it, do not commit it", f)
		}
	}
}
