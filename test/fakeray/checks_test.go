package fakeray_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// check runs `ray start` without --block: every check runs, no process
// starts, exit 0 when all pass (Ray's exit codes otherwise).
func check(t *testing.T, env []string, args ...string) (int, record) {
	t.Helper()
	f := run(t, "", env, nil, args...)
	code := f.wait(t)
	return code, f.record(t)
}

// workerArgs is a valid worker command line without --block, plus extra.
func workerArgs(t *testing.T, extra ...string) []string {
	n := newNode(t, "127.0.0.1", 3)
	a := slices.DeleteFunc(n.args(), func(s string) bool { return s == "--block" })
	return append(a, extra...)
}

// TestUsageErrors: what click refuses is exit 2: unknown options, Ray's
// options the stand-in does not model, a value on a flag, a bad integer,
// a stray argument, an option newer than the Ray version.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown", nil, []string{"--no-such-flag=1"}, "No such option: --no-such-flag"},
		{"unmodelled", nil, []string{"--object-store-memory=100"}, "does not model it"},
		{"flag_value", nil, []string{"--block=yes"}, "does not take a value"},
		{"bad_int", nil, []string{"--num-cpus=1.5"}, "is not a valid integer"},
		{"stray", nil, []string{"extra"}, "unexpected extra argument"},
		{"too_new", []string{"FAKERAY_VERSION=2.7.2"}, nil, "No such option: --runtime-env-agent-port"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, r := check(t, append(secrets(t), c.env...), workerArgs(t, c.args...)...)
			if code != 2 || !strings.Contains(r.Error, c.want) {
				t.Errorf("exit %d error %q, want 2 and %q", code, r.Error, c.want)
			}
		})
	}
	for _, args := range [][]string{{"stop"}, nil} {
		if code := run(t, "", nil, nil, args...).wait(t); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestRayChecks: Ray's own validation of the options is exit 1; what Ray
// accepts passes (space-separated values, JSON labels "{}", string labels).
func TestRayChecks(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // "" = accepted
	}{
		{"ok", nil, ""},
		{"value_after_space", []string{"--num-cpus", "2"}, ""},
		{"empty_json_labels", []string{"--labels={}"}, ""},
		{"string_labels", []string{"--labels=zone=a,gpu=h100"}, ""},
		{"whole_float_resource", []string{`--resources={"vast":2.0}`}, ""},
		{"worker_port_low", []string{"--worker-port-list=1023,2000"}, "between 1024 and 65535. Got: 1023"},
		{"worker_port_high", []string{"--worker-port-list=65536"}, "between 1024 and 65535. Got: 65536"},
		{"worker_port_text", []string{"--worker-port-list=20000,x"}, "comma-separated list of integers"},
		{"fraction_resource", []string{`--resources={"vast":0.5}`}, "whole numbers"},
		{"negative_resource", []string{`--resources={"vast":-1}`}, "nonnegative"},
		{"cpu_resource", []string{`--resources={"CPU":1}`}, "default resources"},
		{"resources_not_json", []string{"--resources=vast:1"}, "not a valid JSON"},
		{"ray_io_label", []string{`--labels={"ray.io/node-type":"x"}`}, "not a valid string of key-value pairs"},
		{"label_not_string", []string{`--labels={"zone":1}`}, "not a valid string of key-value pairs"},
		{"relative_temp", []string{"--temp-dir=tmp"}, "temp_dir must be absolute"},
		{"head_only_port", []string{"--port=6379"}, "--port should only be specified when starting head node"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, r := check(t, secrets(t), workerArgs(t, c.args...)...)
			if c.want == "" {
				if code != 0 {
					t.Errorf("exit %d error %q, want accepted", code, r.Error)
				}
				return
			}
			if code != 1 || !strings.Contains(r.Error, c.want) {
				t.Errorf("exit %d error %q, want 1 and %q", code, r.Error, c.want)
			}
		})
	}
	t.Run("same_port_twice", func(t *testing.T) {
		p := itoa(ports(t, 1)[0])
		code, r := check(t, secrets(t), workerArgs(t, "--metrics-export-port="+p, "--dashboard-agent-listen-port="+p)...)
		if code != 1 || !strings.Contains(r.Error, "used by other components") {
			t.Errorf("exit %d error %q, want 1: one port, two components", code, r.Error)
		}
	})
	t.Run("no_address", func(t *testing.T) {
		code, r := check(t, secrets(t), "start", "--node-ip-address=127.0.0.1")
		if code != 1 || !strings.Contains(r.Error, "`--address` is a required flag") {
			t.Errorf("exit %d error %q, want 1: a worker needs --address", code, r.Error)
		}
	})
}

// TestEnvContract: with RAY_USE_TLS=1 the three PEM files must be set and
// readable; with RAY_AUTH_MODE=token (Ray 2.52+) a token must be found,
// and a RAY_AUTH_TOKEN_PATH that is unreadable or empty is an error. Exit 1.
func TestEnvContract(t *testing.T) {
	set := func(env []string, kv string) []string {
		name, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(slices.Clone(env), func(e string) bool { return strings.HasPrefix(e, name+"=") })
		if strings.Contains(kv, "=") {
			env = append(env, kv)
		}
		return env
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n  \nsecond-line-token\n"), 0o600)
	notPEM := filepath.Join(dir, "key.der")
	os.WriteFile(notPEM, []byte{0x30, 0x82, 0x01}, 0o600)
	cases := []struct {
		name   string
		change []string
		want   string // "" = accepted
	}{
		{"ok", nil, ""},
		{"tls_off_needs_nothing", []string{"RAY_USE_TLS=0", "RAY_TLS_CA_CERT"}, ""},
		{"tls_var_missing", []string{"RAY_TLS_CA_CERT"}, "must also be set"},
		{"tls_file_missing", []string{"RAY_TLS_SERVER_KEY=" + filepath.Join(dir, "none")}, "RAY_TLS_SERVER_KEY"},
		{"tls_not_pem", []string{"RAY_TLS_SERVER_KEY=" + notPEM}, "not a PEM PRIVATE KEY"},
		{"tls_true_spelling", []string{"RAY_USE_TLS=true", "RAY_TLS_CA_CERT"}, "must also be set"},
		{"token_file_missing", []string{"RAY_AUTH_TOKEN_PATH=" + filepath.Join(dir, "none")}, "cannot be opened or is empty"},
		{"token_first_line_empty", []string{"RAY_AUTH_TOKEN_PATH=" + empty}, "cannot be opened or is empty"},
		{"token_nowhere", []string{"RAY_AUTH_TOKEN_PATH"}, "no authentication token"},
		{"token_mode_case", []string{"RAY_AUTH_MODE=TOKEN", "RAY_AUTH_TOKEN_PATH"}, "no authentication token"},
		{"auth_off", []string{"RAY_AUTH_MODE=disabled", "RAY_AUTH_TOKEN_PATH"}, ""},
		{"old_ray_ignores_auth", []string{"FAKERAY_VERSION=2.51.0", "RAY_AUTH_TOKEN_PATH=" + empty}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := secrets(t)
			for _, kv := range c.change {
				env = set(env, kv)
			}
			code, r := check(t, env, workerArgs(t)...)
			if c.want == "" {
				if code != 0 {
					t.Errorf("exit %d error %q, want accepted", code, r.Error)
				}
				return
			}
			if code != 1 || !strings.Contains(r.Error, c.want) {
				t.Errorf("exit %d error %q, want 1 and %q", code, r.Error, c.want)
			}
		})
	}
}
