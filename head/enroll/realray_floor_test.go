package enroll

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rayversion"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestRealRayEnforcesTokenAtTheFloor holds the version floor
// (rayversion.Floor) to real Ray: the oldest supported Ray, with RAY_AUTH_MODE=token on
// its head, refuses a worker node that has no token or a wrong one
// (AuthenticationError) and takes one with the cluster's token. Ray older
// than the floor has no token auth at all, so such a node would join any
// head: that is why the head refuses it.
func TestRealRayEnforcesTokenAtTheFloor(t *testing.T) {
	rvtest.NeedRoot(t, "unshare", "ip")
	if !strings.HasPrefix(rvtest.RayOldest, rayversion.Floor+".") {
		t.Fatalf("the oldest tested Ray %s is not at the floor %s", rvtest.RayOldest, rayversion.Floor)
	}
	python := rvtest.RayPython(t, rvtest.RayOldest)
	tmp, err := os.MkdirTemp("", "rv") // short: Ray's AF_UNIX sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	script, err := filepath.Abs("testdata/token_floor.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-n", "-p", "-f", "-m", "--mount-proc", "sh", "-c", `ip link set lo up && exec "$@"`, "sh", python, script, tmp)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.WaitDelay = 5 * time.Second
	timer := time.AfterFunc(8*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var got struct {
		HeadExit   int        `json:"head_exit"`
		NoToken    joinResult `json:"no_token"`
		WrongToken joinResult `json:"wrong_token"`
		RightToken joinResult `json:"right_token"`
	}
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &got); jerr != nil || got.HeadExit != 0 {
		t.Fatalf("no result (%v, %v, head exit %d):\n%s", err, jerr, got.HeadExit, out)
	}
	for name, r := range map[string]joinResult{"no token": got.NoToken, "a wrong token": got.WrongToken} {
		if r.Exit == 0 || !r.Refused {
			t.Errorf("Ray %s took a worker with %s (exit %d, refused %v)", rvtest.RayOldest, name, r.Exit, r.Refused)
		}
	}
	if got.RightToken.Exit != 0 || got.RightToken.Refused {
		t.Errorf("Ray %s refused a worker with the cluster's token: %+v", rvtest.RayOldest, got.RightToken)
	}
}

type joinResult struct {
	Exit    int  `json:"exit"`
	Refused bool `json:"refused"`
}
