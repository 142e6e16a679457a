package upprogress

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rayvast/rayvast/head/listenports"
	"github.com/rayvast/rayvast/head/rayhead"
)

// PublicRayPorts, with the firewall off, tells the user which of the
// Ray head's ports anyone who reaches this machine reaches: once the set
// has not changed for settle (or after limit), from the processes.
func (p *Printer) PublicRayPorts(ctx context.Context, stateDir string, settle, limit time.Duration) {
	var last []listenports.Listener
	same := time.Now()
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(settle / 5):
		}
		_, ls, err := rayhead.Listening(stateDir)
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
			p.Step("%s", publicRayPortsText(last))
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
