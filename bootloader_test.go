package rayvast

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBootloaderStripped proves the command sent to rentals is the script
// without comments, under the 2 KiB budget, and still valid sh.
func TestBootloaderStripped(t *testing.T) {
	got := Bootloader()
	if !strings.HasPrefix(got, "#!") {
		t.Errorf("shebang lost: %q", got[:20])
	}
	for _, l := range strings.Split(got, "\n")[1:] {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			t.Errorf("comment kept: %q", l)
		}
	}
	if n := len(got) - len(strings.SplitN(got, "\n", 2)[0]) - 1; n >= 2048 {
		t.Errorf("stripped bootloader is %d bytes, want < 2048", n)
	}
	src, _ := os.ReadFile("bootloader.sh")
	if string(src) != bootloaderSource {
		t.Error("embedded text differs from bootloader.sh")
	}
	if out, err := exec.Command("sh", "-n", "-c", got).CombinedOutput(); err != nil {
		t.Errorf("stripped script is not valid sh: %v %s", err, out)
	}
}

// TestPythonSearch proves `head image-check` runs the bootloader's own
// search: the lines are in the stripped bootloader as they are, start with
// the candidate list (RAYVAST_PYTHON first) and end in the die that a
// rental's log shows; with a die of our own and a PATH without Python
// they run and fail to find one.
func TestPythonSearch(t *testing.T) {
	got := PythonSearch()
	if !strings.Contains(Bootloader(), got) {
		t.Fatalf("PythonSearch is not a part of the bootloader:\n%s", got)
	}
	if !strings.Contains(got, `"${RAYVAST_PYTHON:-python3}"`) || !strings.Contains(got, "import ray") {
		t.Errorf("PythonSearch lacks the candidates or the import check:\n%s", got)
	}
	script := "die() { echo \"DIED: $*\"; exit 3; }\n" + got + "echo found \"$P\"\n"
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir()}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "DIED: no Python that can import ray") {
		t.Errorf("search without a Python: %q, want the bootloader's die", out)
	}
}
