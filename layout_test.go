package rayvast

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutRow is a row of docs/layout.md's layout table: | `path` | what |.
var layoutRow = regexp.MustCompile("^\\| `([^`]+)` \\| (.+) \\|$")

// docLayout is the paths docs/layout.md's "## Layout" table names, in order.
func docLayout(doc string) []string {
	_, after, ok := strings.Cut(doc, "\n## Layout\n")
	if !ok {
		return nil
	}
	section, _, _ := strings.Cut(after, "\n## ")
	var paths []string
	for _, line := range strings.Split(section, "\n") {
		if m := layoutRow.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			paths = append(paths, m[1])
		}
	}
	return paths
}

// TestLayout keeps the map matching the code: every package of
// `go list ./...` has its row in docs/layout.md's layout table, and every row
// names a package or a file that exists.
func TestLayout(t *testing.T) {
	b, err := os.ReadFile("docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := docLayout(string(b))
	if len(rows) == 0 {
		t.Fatal("docs/layout.md has no layout table under ## Layout")
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	root, _ := os.Getwd()
	pkgs := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkgs[filepath.ToSlash(rel)] = true
	}
	listed := map[string]bool{}
	for _, p := range rows {
		if listed[p] {
			t.Errorf("docs/layout.md lists %s twice", p)
		}
		listed[p] = true
		if pkgs[p] {
			continue
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			t.Errorf("docs/layout.md lists %s, which is neither a package nor a file", p)
		}
	}
	for p := range pkgs {
		if !listed[p] {
			t.Errorf("package %s has no row in docs/layout.md's layout table", p)
		}
	}
}

// TestLayoutParse: the table parser reads rows of the Layout section
// only.
func TestLayoutParse(t *testing.T) {
	doc := "# x\n| `no` | other table |\n## Layout\n\n| path | what |\n|---|---|\n| `a/b` | one |\n| `.` | root |\n\n## Next\n| `c` | later |\n"
	if got := strings.Join(docLayout(doc), ","); got != "a/b,." {
		t.Errorf("rows = %q, want a/b,.", got)
	}
}

// TestNoTrackedBinaries keeps build output out of the repository: no file
// git tracks starts with the ELF magic (a compiled loadtest binary of 11.8
// MB was once committed at the root). The placeholder agent in
// head/agentbin is text, and the shim's native libraries are ignored.
func TestNoTrackedBinaries(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		f, err := os.Open(name)
		if err != nil {
			continue // deleted in the work tree
		}
		magic := make([]byte, 4)
		n, _ := f.Read(magic)
		f.Close()
		if n == 4 && string(magic) == "\x7fELF" {
			t.Errorf("%s is an ELF binary tracked by git: build output belongs in .gitignore", name)
		}
	}
}
