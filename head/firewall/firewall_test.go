package firewall

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestScripts: the nft scripts name the table, the sets, the ports, the
// lo exception; SyncPorts fills the Ray head's ports in one flush-and-fill; Sync is one transaction that flushes and refills; bad input
// is refused before nft runs.
func TestScripts(t *testing.T) {
	var scripts []string
	nft := func(_ context.Context, s string) error { scripts = append(scripts, s); return nil }
	fw, err := Open(context.Background(), Config{Table: "rvtest", Ports: []int{8443, 8444}, Nft: nft})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"table inet rvtest {", "type ipv4_addr", "type ipv6_addr", `iif "lo" accept`,
		"tcp dport { 8443, 8444 } ip saddr != @allowed4 counter drop", "tcp dport { 8443, 8444 } ip6 saddr != @allowed6 counter drop",
		"set rayports {", "tcp dport @rayports ip saddr != @allowed4 counter drop", "tcp dport @rayports ip6 saddr != @allowed6 counter drop"} {
		if !strings.Contains(scripts[0], want) {
			t.Errorf("ruleset lacks %q:\n%s", want, scripts[0])
		}
	}
	if err := fw.Sync([]string{"203.0.113.5", "::ffff:203.0.113.6", "2001:db8::1", "203.0.113.5"}); err != nil {
		t.Fatal(err)
	}
	want := "flush set inet rvtest allowed4\nflush set inet rvtest allowed6\nadd element inet rvtest allowed4 { 203.0.113.5, 203.0.113.6 }\nadd element inet rvtest allowed6 { 2001:db8::1 }\n"
	if scripts[1] != want {
		t.Errorf("sync script:\n%s\nwant:\n%s", scripts[1], want)
	}
	if err := fw.Sync([]string{"2001:db8::1", "203.0.113.6", "203.0.113.5"}); err != nil || len(scripts) != 2 {
		t.Errorf("unchanged set ran nft again (%d scripts, %v)", len(scripts), err)
	}
	if err := fw.SyncPorts([]int{44217, 6379, 44217}); err != nil {
		t.Fatal(err)
	}
	if got, want := scripts[len(scripts)-1], "flush set inet rvtest rayports\nadd element inet rvtest rayports { 6379, 44217 }\n"; got != want {
		t.Errorf("ray ports script:\n%s\nwant:\n%s", got, want)
	}
	n := len(scripts)
	if err := fw.SyncPorts([]int{6379, 44217}); err != nil || len(scripts) != n {
		t.Errorf("unchanged ray ports ran nft again (%d scripts, %v)", len(scripts), err)
	}
	if err := fw.Sync([]string{"203.0.113.5; flush ruleset"}); err == nil {
		t.Error("non-IP accepted")
	}
	for _, cfg := range []Config{{Table: "bad name", Ports: []int{1}}, {Ports: nil}, {Ports: []int{70000}}} {
		cfg.Nft = nft
		if _, err := Open(context.Background(), cfg); err == nil {
			t.Errorf("Open(%+v) = nil error", cfg)
		}
	}
}

// TestNoNft: `--firewall on` on a machine without nft says what to do,
// and Remove (head down) treats a missing nft as no table.
func TestNoNft(t *testing.T) {
	_, err := Open(context.Background(), Config{Ports: []int{8443}, Nft: RunNft("rayvast-no-such-nft")})
	if err == nil || !strings.Contains(err.Error(), "apt-get install nftables") || !strings.Contains(err.Error(), "--firewall off") {
		t.Errorf("Open without nft: %v; want advice to install nftables or use --firewall off", err)
	}
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Open without nft: %v does not wrap exec.ErrNotFound", err)
	}
	if err := Remove(context.Background(), "rayvast", RunNft("rayvast-no-such-nft")); err != nil {
		t.Errorf("Remove without nft: %v, want nil", err)
	}
}
