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
