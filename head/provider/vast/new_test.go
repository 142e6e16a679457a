package vast

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
)

// TestNewFromEnv: the key comes from VAST_API_KEY (then removed from the
// environment) or a file; no key, a bad URL or a settings file with unknown
// fields is refused with a clear error; the key is never logged.
func TestNewFromEnv(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte(testKey+"\n"), 0o600)
	good := filepath.Join(dir, "vast.json")
	os.WriteFile(good, []byte(`{"image":"img:1","node_types":{"gpu":{"gpu_name":"RTX 4090","max_dph":0.4}}}`), 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"imagee":"x"}`), 0o600)

	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"key from env", map[string]string{EnvAPIKey: testKey, EnvSettings: good}, ""},
		{"key from file", map[string]string{EnvAPIKeyFile: keyFile, EnvBaseURL: "http://127.0.0.1:1"}, ""},
		{"no key", map[string]string{}, "no API key"},
		{"missing key file", map[string]string{EnvAPIKeyFile: filepath.Join(dir, "vast.json.missing")}, "read API key file"},
		{"bad url", map[string]string{EnvAPIKey: testKey, EnvBaseURL: "ftp://x"}, "base URL"},
		{"unknown settings field", map[string]string{EnvAPIKey: testKey, EnvSettings: bad}, "imagee"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{EnvAPIKey, EnvAPIKeyFile, EnvBaseURL, EnvSettings} {
				t.Setenv(k, tt.env[k])
			}
			var logs bytes.Buffer
			p, err := New(provider.Options{Cluster: "c", Log: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil || p.Name() != "vast" {
				t.Fatalf("New: %v", err)
			}
			if tt.env[EnvAPIKey] != "" && tt.wantErr == "" && os.Getenv(EnvAPIKey) != "" {
				t.Error("VAST_API_KEY left in the environment")
			}
			if strings.Contains(logs.String(), testKey) || (err != nil && strings.Contains(err.Error(), testKey)) {
				t.Error("key leaked")
			}
		})
	}
}

// TestIntervalsFromSettings: intervals_s overrides vast's limits per
// endpoint; an unknown endpoint or a negative interval is refused.
func TestIntervalsFromSettings(t *testing.T) {
	lim, err := limitsFrom(map[string]float64{"create": 10, "list": 0.5})
	if err != nil || lim.Interval[EpCreate] != 10*time.Second || lim.Interval[EpList] != 500*time.Millisecond || lim.Interval[EpShow] != 2*time.Second {
		t.Errorf("limits = %v, %v", lim.Interval, err)
	}
	for _, bad := range []map[string]float64{{"creates": 1}, {"show": -1}} {
		if _, err := limitsFrom(bad); err == nil {
			t.Errorf("limitsFrom(%v) = nil error", bad)
		}
	}
}
