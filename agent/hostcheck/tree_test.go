package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree builds a fake host root in a temp dir. Keys are paths under the
// root: "dir/" makes a directory, "link -> target" a symlink (targets like
// "net:[123]" need not exist, just as in /proc), anything else a file with
// the value as content.
func tree(t testing.TB, entries map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for k, v := range entries {
		if name, target, ok := strings.Cut(k, " -> "); ok {
			p := filepath.Join(root, name)
			mkdir(t, filepath.Dir(p))
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := filepath.Join(root, k)
		if strings.HasSuffix(k, "/") {
			mkdir(t, p)
			continue
		}
		mkdir(t, filepath.Dir(p))
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func mkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}
