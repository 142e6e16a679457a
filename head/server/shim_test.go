package server

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/shim"
)

func TestLoadShim(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sitecustomize.py")
	if err := os.WriteFile(file, []byte("MINE = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	builtIn, libs := shim.Default()
	tests := []struct {
		arg, wantName, wantContent, wantLog string
	}{
		{"", "sitecustomize.py", string(builtIn), ""},
		{"none", "", "", "no shim"},
		{file, "sitecustomize.py", "MINE = 1\n", ""},
	}
	if len(libs) == 0 {
		tests[0].wantLog = "without its native library"
	}
	for _, tt := range tests {
		var logs bytes.Buffer
		got, err := loadShim(tt.arg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatalf("loadShim(%q): %v", tt.arg, err)
		}
		name, content := "", ""
		if got != nil {
			b, _ := base64.StdEncoding.DecodeString(got.ContentB64)
			name, content = got.Name, string(b)
		}
		if name != tt.wantName || content != tt.wantContent {
			t.Errorf("loadShim(%q) = %q (%d bytes), want %q (%d bytes)", tt.arg, name, len(content), tt.wantName, len(tt.wantContent))
		}
		if !strings.Contains(logs.String(), tt.wantLog) || tt.wantLog == "" && logs.Len() > 0 {
			t.Errorf("loadShim(%q) logged %q, want %q", tt.arg, logs.String(), tt.wantLog)
		}
	}
	if _, err := loadShim(filepath.Join(t.TempDir(), "missing.py"), slog.Default()); err == nil {
		t.Error("a missing --shim file is not an error")
	}
}
