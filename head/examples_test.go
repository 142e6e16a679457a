package main

import (
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/server"
)

// TestExamplesLoad: the shipped example configs are valid and name the
// provider they are examples of.
func TestExamplesLoad(t *testing.T) {
	for file, kind := range map[string]string{"docker.json": "docker", "vast.json": "vast"} {
		cfg, err := config.Load(filepath.Join("..", "examples", file))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if got := server.ProviderKind("", cfg); got != kind {
			t.Errorf("%s: provider kind %q, want %q", file, got, kind)
		}
	}
}
