package firewall

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/statedir"
)

// TestTableForStateDir: two heads' state dirs name two distinct valid
// tables; a dir without state names the default.
func TestTableForStateDir(t *testing.T) {
	var names []string
	for range 2 {
		dir := filepath.Join(t.TempDir(), "state")
		if err := statedir.Init(statedir.Options{Dir: dir, IP: "127.0.0.1", Cluster: "c"}); err != nil {
			t.Fatal(err)
		}
		names = append(names, TableForStateDir(dir))
	}
	a, b := names[0], names[1]
	if a == b || !strings.HasPrefix(a, "rayvast_") || !tableName.MatchString(a) || !tableName.MatchString(b) {
		t.Errorf("tables %q and %q: want distinct valid rayvast_<app id> names", a, b)
	}
	if got := TableForStateDir(t.TempDir()); got != DefaultTable {
		t.Errorf("table of a dir without state = %q, want %q", got, DefaultTable)
	}
}

// TestTableFor: only a hex app id of 12 digits or more names its own table.
func TestTableFor(t *testing.T) {
	for id, want := range map[string]string{
		"0123456789abcdef": "rayvast_0123456789ab",
		"0123456789a":      DefaultTable,
		"zz23456789abcdef": DefaultTable,
		"":                 DefaultTable,
	} {
		if got := TableFor(id); got != want {
			t.Errorf("TableFor(%q) = %q, want %q", id, got, want)
		}
	}
}
