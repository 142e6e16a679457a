package server

import (
	"slices"
	"testing"

	"github.com/rayvast/rayvast/head/config"
)

// TestKindsTableIsTheConfigsKinds: every kind the config accepts has a row
// with --firewall auto's answer, and the table holds no kind the config
// refuses; a kind with a built-in provider reads settings and opens it.
func TestKindsTableIsTheConfigsKinds(t *testing.T) {
	var names []string
	for n, k := range kinds {
		names = append(names, n)
		if k.firewall == nil {
			t.Errorf("kind %s: no firewall answer", n)
		}
		if (k.settings == nil) != (k.open == nil) {
			t.Errorf("kind %s: settings without open, or open without settings", n)
		}
	}
	slices.Sort(names)
	want := slices.Clone(config.ProviderKinds)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("kinds table %v, config.ProviderKinds %v", names, want)
	}
}
