package bundle

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/agent/internal/enrolltest"
	"github.com/rayvast/rayvast/internal/rvtest"
)

func parsed(t *testing.T) *Bundle {
	t.Helper()
	ca := enrolltest.CA(t)
	ports := enrolltest.Ports(40000)
	b, err := Parse(enrolltest.Response(t, ca, id, ip, ports), ca.Cert, id, ports)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteRefusesSymlinkedState proves a state dir (or shim dir) that an
// image pre-created as a symlink is refused: following it would chmod and
// fill a directory of the image's choosing (a shared, world-readable one)
// with the node key and the cluster token.
func TestWriteRefusesSymlinkedState(t *testing.T) {
	b := parsed(t)
	for _, which := range []string{"state", "shim"} {
		t.Run(which, func(t *testing.T) {
			root := t.TempDir()
			elsewhere := filepath.Join(root, "elsewhere")
			if err := os.Mkdir(elsewhere, 0o755); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "state")
			link := dir
			if which == "shim" {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				link = PathsIn(dir).ShimDir
			}
			if err := os.Symlink(elsewhere, link); err != nil {
				t.Fatal(err)
			}
			if _, err := Write(dir, b, Switches{}); err == nil {
				t.Errorf("Write through a symlinked %s dir succeeded", which)
			}
			if st, _ := os.Stat(elsewhere); st.Mode().Perm() != 0o755 {
				t.Errorf("the symlink's target was chmod-ed to %v", st.Mode().Perm())
			}
			if entries, _ := os.ReadDir(elsewhere); which == "state" && len(entries) != 0 {
				t.Errorf("files written into the symlink's target: %v", entries)
			}
		})
	}
}

// TestWriteRefusesStateOwnedByOthers proves an existing state dir owned by
// another user is refused (that user could read or swap the files).
func TestWriteRefusesStateOwnedByOthers(t *testing.T) {
	rvtest.NeedRoot(t) // to chown a dir to another user
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, parsed(t), Switches{}); err == nil {
		t.Error("Write into a state dir owned by uid 65534 succeeded")
	}
}
