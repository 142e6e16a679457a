package main

import (
	"os"
	"strings"
	"testing"
)

// TestRootHoldsVerbsOnly: every file of head/'s root (tests aside) is
// main.go or a verb that the usage lists, named after it (ray-head-cert in
// rayheadcert.go); what a verb needs beyond its flags lives in a package,
// so this folder reads as the list of commands.
func TestRootHoldsVerbsOnly(t *testing.T) {
	verbs := map[string]bool{"main": true}
	_, list, _ := strings.Cut(usage, "commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			verbs[strings.ReplaceAll(f[0], "-", "")] = true
		}
	}
	if !verbs["up"] || !verbs["rayheadcert"] {
		t.Fatalf("usage's commands not read: %v", verbs)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".go")
		if !ok || strings.HasSuffix(name, "_test") {
			continue
		}
		if !verbs[name] {
			t.Errorf("head/%s.go is not a verb's file: move it into a package (verbs: %v)", name, verbs)
		}
	}
}
