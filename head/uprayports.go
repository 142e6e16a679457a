package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rayvast/rayvast/head/listenports"
	"github.com/rayvast/rayvast/head/rayhead"
)

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
