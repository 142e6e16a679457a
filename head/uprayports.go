package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/listenports"
	"github.com/rayvast/rayvast/head/rayhead"
)

// firewallOn is whether serve guards its ports: --firewall on, or auto
// with the vast provider (rentals there reach the head from the internet)
// and with none unless the config says its network is private (an
// external provider's rentals are as public as vast's, whoever rents them).
// Only the docker provider's local network stays open by default.
func firewallOn(f serveFlags) bool {
	if f.firewall != "auto" {
		return f.firewall == "on"
	}
	return f.provider == "vast" || (f.provider == "none" && !f.privateNetwork)
}

// checkFirewall refuses a --firewall that cannot be honoured, before
// anything starts: a value other than on, off or auto, or a firewall that
// is on while nftables cannot be driven here (no nft, no CAP_NET_ADMIN).
// nft runs nft scripts (nil: the nft binary).
func checkFirewall(ctx context.Context, f serveFlags, nft func(ctx context.Context, script string) error) error {
	switch f.firewall {
	case "on", "off", "auto":
	default:
		return fmt.Errorf("--firewall %q: want on, off or auto", f.firewall)
	}
	if !firewallOn(f) {
		return nil
	}
	if nft == nil {
		nft = firewall.RunNft("nft")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := nft(ctx, "list tables\n"); err != nil {
		return fmt.Errorf("--firewall %s (provider %s): nftables cannot be used here, so ports A and B and the Ray head's ports would be open to anyone: %v", f.firewall, f.provider, err)
	}
	return nil
}

// rayHeadListeners lists what the Ray head of the state dir listens on:
// the supervised process (pid) and its descendants (gcs_server, raylet,
// the dashboard and its agent, workers), read from /proc.
func rayHeadListeners(stateDir string) (pid int, ls []listenports.Listener, err error) {
	st, ok, err := rayhead.ReadStatus(stateDir)
	if err != nil {
		return 0, nil, err
	}
	if !ok || st.PID <= 0 {
		return 0, nil, errors.New("ray head not running")
	}
	ls, err = listenports.Of("/", st.PID)
	return st.PID, ls, err
}

// rayHeadPorts is the firewall's source of the Ray head's ports: those it
// listens on at an address other than loopback. They only grow while one
// Ray head process runs (a look at /proc races with processes opening and
// closing files, so one look may miss a port; a worker's closed port stays
// guarded, which costs nothing), and start again with a restarted one.
func rayHeadPorts(stateDir string) func() ([]int, error) {
	var pid int
	seen := map[int]bool{}
	return func() ([]int, error) {
		now, ls, err := rayHeadListeners(stateDir)
		if err != nil {
			return nil, err
		}
		if now != pid {
			pid, seen = now, map[int]bool{}
		}
		for _, p := range listenports.ExposedPorts(ls) {
			seen[p] = true
		}
		out := make([]int, 0, len(seen))
		for p := range seen {
			out = append(out, p)
		}
		sort.Ints(out)
		return out, nil
	}
}

// sayPublicRayPorts, with the firewall off, tells the user which of the
// Ray head's ports anyone who reaches this machine reaches: once the set
// has not changed for settle (or after limit), from the processes.
func sayPublicRayPorts(ctx context.Context, stateDir string, p *progress, settle, limit time.Duration) {
	var last []listenports.Listener
	same := time.Now()
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(settle / 5):
		}
		_, ls, err := rayHeadListeners(stateDir)
		if err != nil {
			continue
		}
		var exposed []listenports.Listener
		for _, l := range ls {
			if l.Exposed() {
				exposed = append(exposed, l)
			}
		}
		if !slices.EqualFunc(exposed, last, func(a, b listenports.Listener) bool { return a.Addr == b.Addr }) {
			last, same = exposed, time.Now()
		}
		if len(last) > 0 && (time.Since(same) >= settle || time.Now().After(deadline)) {
			p.step("%s", publicRayPortsText(last))
			return
		}
	}
}

// publicRayPortsText names the exposed listeners for the user.
func publicRayPortsText(ls []listenports.Listener) string {
	addrs := make([]string, len(ls))
	for i, l := range ls {
		addrs[i] = l.Addr.String()
	}
	return fmt.Sprintf("Ray head: firewall off: %d ports are public to anyone who reaches this machine: %s "+
		"(Ray's workers add more while they run; --firewall on opens them to nodes only)", len(ls), strings.Join(addrs, " "))
}
