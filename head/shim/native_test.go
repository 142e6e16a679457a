package shim

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestNativeReproducible: two builds from sources in two different dirs
// give the same bytes (no paths, no build id), so head is reproducible too.
func TestNativeReproducible(t *testing.T) {
	var libs [2][]byte
	for i := range libs {
		src := filepath.Join(t.TempDir(), fmt.Sprintf("src-%d", i))
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"build.sh", "natshim.c"} {
			b, err := os.ReadFile(filepath.Join("native", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, f), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(buildNative(t, src))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(src)) || bytes.Contains(b, []byte("natshim.c")) {
			t.Errorf("build %d carries its source path", i)
		}
		libs[i] = b
	}
	if !bytes.Equal(libs[0], libs[1]) {
		t.Errorf("two builds differ: %d and %d bytes", len(libs[0]), len(libs[1]))
	}
}

// glibcBase is the first glibc version of each architecture: any glibc
// of that architecture has every symbol pinned to it.
var glibcBase = map[string]string{"amd64": "GLIBC_2.2.5", "arm64": "GLIBC_2.17"}

// TestNativeLoadsOnOldGlibc: every libc symbol the library imports is
// pinned to the architecture's base version, it needs libc alone, and it
// exports the socket calls it interposes only.
func TestNativeLoadsOnOldGlibc(t *testing.T) {
	f, err := elf.Open(buildNative(t, "native"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	imps, err := f.ImportedSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range imps {
		if s.Version != glibcBase[runtime.GOARCH] {
			t.Errorf("imports %s@%s, want @%s", s.Name, s.Version, glibcBase[runtime.GOARCH])
		}
	}
	if libs, _ := f.ImportedLibraries(); !slices.Equal(libs, []string{"libc.so.6"}) {
		t.Errorf("needs %q, want libc.so.6 alone", libs)
	}
	syms, _ := f.DynamicSymbols()
	var exported []string
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
			exported = append(exported, s.Name)
		}
	}
	slices.Sort(exported)
	if !slices.Equal(exported, []string{"accept", "accept4", "bind", "connect", "getsockname", "listen"}) {
		t.Errorf("exports %q, want accept, accept4, bind, connect, getsockname and listen", exported)
	}
	if f.Section(".hash") == nil {
		t.Error("no DT_HASH: loaders before glibc 2.5 cannot find the symbols")
	}
}

// TestNativeRewrites runs the C probe under the library with the node IP
// 203.0.113.7 standing for a public IP on no interface and 127.0.0.1 for
// the container's. Connects that keep the node IP are UDP (no packet is
// sent); TCP connects go only to the loopback listener.
func TestNativeRewrites(t *testing.T) {
	lib, probe := buildNative(t, "native"), buildProbe(t)
	ports := rvtest.FreePorts(t, "127.0.0.1", 2)
	own, other := ports[0], ports[1]
	rules := fmt.Sprintf("203.0.113.7 127.0.0.1 %d,40000-40002", own)
	p := func(n int) string { return fmt.Sprint(n) }
	tests := []struct {
		name, env string
		ops       []string
		want      []string // per op: "ok LOCAL PEER" with ports, or "err ERRNO"
	}{
		{"without the library a bind to the node IP fails", "",
			[]string{"tcp4", "bind", "203.0.113.7", p(own)}, []string{"err EADDRNOTAVAIL"}},
		{"bind node IP goes to the container IP, any port", rules,
			[]string{"tcp4", "bind", "203.0.113.7", p(other)}, []string{"ok 127.0.0.1:" + p(other) + " -:0"}},
		{"connect node IP on an own port reaches the container IP", rules,
			[]string{"tcp4", "listen", "203.0.113.7", p(own), "tcp4", "connect", "203.0.113.7", p(own)},
			[]string{"ok 127.0.0.1:" + p(own) + " -:0", "ok 127.0.0.1:* 127.0.0.1:" + p(own)}},
		{"own port ranges count", rules,
			[]string{"udp4", "connect", "203.0.113.7", "40001"}, []string{"ok 127.0.0.1:* 127.0.0.1:40001"}},
		{"connect node IP on another port is left alone", rules,
			[]string{"udp4", "connect", "203.0.113.7", p(other)}, []string{"ok *:* 203.0.113.7:" + p(other)}},
		{"v4-mapped bind and connect", rules,
			[]string{"tcp6", "listen", "::ffff:203.0.113.7", p(own), "tcp6", "connect", "::ffff:203.0.113.7", p(own)},
			[]string{"ok ::ffff:127.0.0.1:" + p(own) + " -:0", "ok ::ffff:127.0.0.1:* ::ffff:127.0.0.1:" + p(own)}},
		{"v4-mapped connect on another port is left alone", rules,
			[]string{"udp6", "connect", "::ffff:203.0.113.7", p(other)}, []string{"ok *:* ::ffff:203.0.113.7:" + p(other)}},
		{"other addresses are left alone", rules,
			[]string{"udp4", "connect", "203.0.113.8", p(own)}, []string{"ok *:* 203.0.113.8:" + p(own)}},
		{"no known ports: binds still go to the container IP", "203.0.113.7 127.0.0.1 0",
			[]string{"tcp4", "bind", "203.0.113.7", p(own), "udp4", "connect", "203.0.113.7", p(own)},
			[]string{"ok 127.0.0.1:" + p(own) + " -:0", "ok *:* 203.0.113.7:" + p(own)}},
		{"malformed rules change nothing", "203.0.113.7 127.0.0.1 " + p(own) + ",x",
			[]string{"tcp4", "bind", "203.0.113.7", p(own)}, []string{"err EADDRNOTAVAIL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"LD_PRELOAD=" + lib}
			if tt.env != "" {
				env = append(env, "NAT_SHIM="+tt.env)
			}
			runProbe(t, probe, env, tt.ops, tt.want)
		})
	}
}

// runProbe runs the probe's ops in env and matches each line it prints.
func runProbe(t *testing.T, probe string, env, ops, want []string) {
	t.Helper()
	cmd := exec.Command(probe, ops...)
	cmd.Env = env
	out, _ := cmd.Output()
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i, line := range got {
		if !matchProbe(strings.TrimPrefix(line, fmt.Sprint(i)+" "), want[i]) {
			t.Errorf("op %d: got %q, want %q", i, line, want[i])
		}
	}
}

// matchProbe compares a probe line with a pattern whose fields may be "*"
// or "IP:*" (an ephemeral port).
func matchProbe(line, pattern string) bool {
	got, want := strings.Fields(line), strings.Fields(pattern)
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		switch {
		case want[i] == "*:*":
		case strings.HasSuffix(want[i], ":*"):
			if got[i][:max(strings.LastIndex(got[i], ":"), 0)]+":*" != want[i] {
				return false
			}
		case got[i] != want[i]:
			return false
		}
	}
	return true
}
