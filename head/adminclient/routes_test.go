package adminclient

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spelledRoutes are the admin API's routes that only head/admin (which
// serves them) and this package (which calls them) may spell.
var spelledRoutes = []string{CandidatesPath, NodesPath, ProviderPath, BlocklistPath}

// routeOwners are the packages allowed to spell them, from the repository root.
var routeOwners = []string{"head/admin", "head/adminclient"}

// TestRoutesSpelledOnce: no Go string literal outside head/admin and
// head/adminclient holds an admin API route; every other caller goes
// through the typed methods, so a route is renamed in two places, not
// twenty. Comments may name routes (they cite docs/protocol.md §8).
func TestRoutesSpelledOnce(t *testing.T) {
	root := repoRoot(t)
	for _, f := range routeSpellers(t, root) {
		t.Errorf("%s spells an admin API route in a string; call head/adminclient's methods instead", f)
	}
}

// routeSpellers lists file:line of every string literal outside
// routeOwners that holds one of spelledRoutes.
func routeSpellers(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || owned(rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		var s scanner.Scanner
		s.Init(fset.AddFile(rel, -1, len(src)), src, nil, 0)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.STRING && holdsRoute(lit) {
				found = append(found, fset.Position(pos).String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func owned(rel string) bool {
	for _, o := range routeOwners {
		if rel == o {
			return true
		}
	}
	return false
}

func holdsRoute(lit string) bool {
	for _, r := range spelledRoutes {
		if strings.Contains(lit, r) {
			return true
		}
	}
	return false
}

// repoRoot is the directory of go.mod above the test's.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = up
	}
}
