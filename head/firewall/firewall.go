// Package firewall is the head's "security group rule" of seed 000 for the
// head's own machine: ports A and B, and the ports the Ray head listens on,
// accept TCP only from the IPs of live candidates and nodes (and from the
// machine itself). It drives nftables through the nft CLI: one table
// (`inet rayvast` by default) with a named set of allowed IPs per family, a
// named set of the Ray head's ports (they change: Ray picks some at random
// each run) and an input chain that drops traffic to A, B or those ports
// from anyone else. Every change is one `nft -f -` transaction, so the rules
// are never half applied.
package firewall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config builds a Firewall.
type Config struct {
	Table string // nftables table in family inet; default "rayvast"
	Ports []int  // the guarded TCP ports: A and B
	// Nft runs nft with the script on stdin (nft -f -). Default: the nft
	// binary on PATH. Tests run it inside a network namespace.
	Nft func(ctx context.Context, script string) error
	Log *slog.Logger
}

// Firewall is safe for concurrent use.
type Firewall struct {
	cfg      Config
	mu       sync.Mutex
	allowed  []string // what the sets hold, sorted
	rayPorts []int    // what the rayports set holds, sorted
}

var tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,31}$`)

// Open (re)creates the table with empty sets: nothing may reach ports A and
// B until Allow or Sync names it. Loopback is always allowed (the head's own
// machine is the owner's).
func Open(ctx context.Context, cfg Config) (*Firewall, error) {
	if cfg.Table == "" {
		cfg.Table = "rayvast"
	}
	if !tableName.MatchString(cfg.Table) {
		return nil, fmt.Errorf("firewall: table name %q", cfg.Table)
	}
	if len(cfg.Ports) == 0 {
		return nil, errors.New("firewall: no ports to guard")
	}
	for _, p := range cfg.Ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("firewall: port %d", p)
		}
	}
	if cfg.Nft == nil {
		cfg.Nft = RunNft("nft")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f := &Firewall{cfg: cfg}
	if err := cfg.Nft(ctx, f.ruleset()); err != nil {
		return nil, fmt.Errorf("firewall: create table inet %s: %w", cfg.Table, err)
	}
	cfg.Log.Info("firewall: ports guarded", "table", "inet "+cfg.Table, "ports", cfg.Ports)
	return f, nil
}

// RunNft returns an Nft func running argv plus "-f -": ["nft"], or
// ["ip", "netns", "exec", NS, "nft"] to act inside a network namespace.
func RunNft(argv ...string) func(ctx context.Context, script string) error {
	return func(ctx context.Context, script string) error {
		cmd := exec.CommandContext(ctx, argv[0], append(argv[1:len(argv):len(argv)], "-f", "-")...)
		cmd.Stdin = strings.NewReader(script)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				return fmt.Errorf("%s not found: install nftables (apt-get install nftables) or run head serve with --firewall off: %w", argv[0], err)
			}
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
		}
		return nil
	}
}

func (f *Firewall) ports() string {
	s := make([]string, len(f.cfg.Ports))
	for i, p := range f.cfg.Ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// ruleset replaces the table whole ("add" first so "delete" never fails).
// The input chain runs after source NAT (priority 100): it must judge the
// source IP the head's sockets see, which on a machine that translates its
// peers (the docker provider's vast network) is the translated one.
func (f *Firewall) ruleset() string {
	t := f.cfg.Table
	return fmt.Sprintf(`add table inet %[1]s
delete table inet %[1]s
table inet %[1]s {
	set allowed4 {
		type ipv4_addr
	}
	set allowed6 {
		type ipv6_addr
	}
	set rayports {
		type inet_service
	}
	chain input {
		type filter hook input priority 110; policy accept;
		iif "lo" accept
		tcp dport { %[2]s } ip saddr != @allowed4 counter drop
		tcp dport { %[2]s } ip6 saddr != @allowed6 counter drop
		tcp dport @rayports ip saddr != @allowed4 counter drop
		tcp dport @rayports ip6 saddr != @allowed6 counter drop
	}
}
`, t, f.ports())
}

// parse canonicalises ips and splits them by family.
func parse(ips []string) (v4, v6 []string, all []string, err error) {
	seen := map[string]bool{}
	for _, s := range ips {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("firewall: %q is not an IP", s)
		}
		a = a.Unmap().WithZone("")
		k := a.String()
		if seen[k] {
			continue
		}
		seen[k] = true
		all = append(all, k)
		if a.Is4() {
			v4 = append(v4, k)
		} else {
			v6 = append(v6, k)
		}
	}
	sort.Strings(all)
	return v4, v6, all, nil
}

// Sync makes the allowed sets exactly ips, in one transaction. A nil
// Firewall (switched off) does nothing.
func (f *Firewall) Sync(ips []string) error {
	if f == nil {
		return nil
	}
	v4, v6, all, err := parse(ips)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Join(all, ",") == strings.Join(f.allowed, ",") {
		return nil
	}
	if err := f.replaceSets(map[string][]string{"allowed4": v4, "allowed6": v6}); err != nil {
		return fmt.Errorf("firewall: sync: %w", err)
	}
	added, removed := diff(f.allowed, all)
	f.allowed = all
	f.cfg.Log.Info("firewall: allowed IPs", "added", added, "removed", removed, "count", len(all))
	return nil
}

// SyncPorts makes the guarded Ray head ports exactly ports (beside A and B,
// which are always guarded), in one transaction. A nil Firewall does
// nothing.
func (f *Firewall) SyncPorts(ports []int) error {
	if f == nil {
		return nil
	}
	ps := append([]int(nil), ports...)
	sort.Ints(ps)
	ps = slices.Compact(ps)
	for _, p := range ps {
		if p < 1 || p > 65535 {
			return fmt.Errorf("firewall: port %d", p)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Equal(ps, f.rayPorts) {
		return nil
	}
	elems := make([]string, len(ps))
	for i, p := range ps {
		elems[i] = strconv.Itoa(p)
	}
	if err := f.replaceSets(map[string][]string{"rayports": elems}); err != nil {
		return fmt.Errorf("firewall: sync ray ports: %w", err)
	}
	f.rayPorts = ps
	f.cfg.Log.Info("firewall: Ray head ports guarded", "ports", ps)
	return nil
}

// replaceSets makes each named set of the table hold exactly its
// elements, in one nft transaction (flush, then add). The caller holds mu.
func (f *Firewall) replaceSets(sets map[string][]string) error {
	t := f.cfg.Table
	var b strings.Builder
	names := slices.Sorted(maps.Keys(sets))
	for _, name := range names {
		fmt.Fprintf(&b, "flush set inet %s %s\n", t, name)
	}
	for _, name := range names {
		if elems := sets[name]; len(elems) > 0 {
			fmt.Fprintf(&b, "add element inet %s %s { %s }\n", t, name, strings.Join(elems, ", "))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.cfg.Nft(ctx, b.String())
}

// RayPorts returns the Ray head ports the rayports set holds.
func (f *Firewall) RayPorts() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.rayPorts...)
}

// Allow adds one IP (a candidate now running).
func (f *Firewall) Allow(ip string) error {
	f.mu.Lock()
	cur := append([]string(nil), f.allowed...)
	f.mu.Unlock()
	return f.Sync(append(cur, ip))
}

// Revoke removes one IP (a candidate ended).
func (f *Firewall) Revoke(ip string) error {
	_, _, one, err := parse([]string{ip})
	if err != nil {
		return err
	}
	f.mu.Lock()
	var keep []string
	for _, a := range f.allowed {
		if a != one[0] {
			keep = append(keep, a)
		}
	}
	f.mu.Unlock()
	return f.Sync(keep)
}

// Allowed returns the IPs the sets hold.
func (f *Firewall) Allowed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.allowed...)
}

// Close removes the table: ports A and B and the Ray head's ports are open
// again as without rayvast.
// A nil Firewall does nothing.
func (f *Firewall) Close() error {
	if f == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t := f.cfg.Table
	if err := f.cfg.Nft(ctx, fmt.Sprintf("add table inet %s\ndelete table inet %s\n", t, t)); err != nil {
		return fmt.Errorf("firewall: remove table inet %s: %w", t, err)
	}
	f.cfg.Log.Info("firewall: table removed", "table", "inet "+t)
	return nil
}

// Remove deletes a table left by an earlier head (`head down` with no
// running head), without knowing its ports.
func Remove(ctx context.Context, table string, nft func(ctx context.Context, script string) error) error {
	if table == "" {
		table = "rayvast"
	}
	if nft == nil {
		nft = RunNft("nft")
	}
	err := nft(ctx, fmt.Sprintf("add table inet %s\ndelete table inet %s\n", table, table))
	if errors.Is(err, exec.ErrNotFound) {
		return nil // no nftables here: no table either
	}
	return err
}

// Exists reports whether the table is in the ruleset (false too when nft
// is missing or fails): a table left by an earlier head.
func Exists(ctx context.Context, table string, nft func(ctx context.Context, script string) error) bool {
	if nft == nil {
		nft = RunNft("nft")
	}
	if !tableName.MatchString(table) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return nft(ctx, "list table inet "+table+"\n") == nil
}

func diff(old, cur []string) (added, removed []string) {
	o, c := map[string]bool{}, map[string]bool{}
	for _, s := range old {
		o[s] = true
	}
	for _, s := range cur {
		c[s] = true
		if !o[s] {
			added = append(added, s)
		}
	}
	for _, s := range old {
		if !c[s] {
			removed = append(removed, s)
		}
	}
	return added, removed
}
