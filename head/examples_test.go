package main

import (
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/head/config"
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
		if got := providerKind("", cfg); got != kind {
			t.Errorf("%s: provider kind %q, want %q", file, got, kind)
		}
	}
}
