package firewall

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/statedir"
)

// TestTablePerState: two heads' states (each its own app id) name two
// distinct valid tables.
func TestTablePerState(t *testing.T) {
	var names []string
	for range 2 {
		dir := filepath.Join(t.TempDir(), "state")
		if err := statedir.Init(statedir.Options{Dir: dir, IP: "127.0.0.1", Cluster: "c"}); err != nil {
			t.Fatal(err)
		}
		st, err := statedir.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, TableFor(st.AppID))
	}
	a, b := names[0], names[1]
	if a == b || !strings.HasPrefix(a, "rayvast_") || !tableName.MatchString(a) || !tableName.MatchString(b) {
		t.Errorf("tables %q and %q: want distinct valid rayvast_<app id> names", a, b)
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
