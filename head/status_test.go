package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestStatusInert proves every field `head status` prints is inert: text
// from a provider or the admin API (host_id, reason, node type, IDs) cannot
// move the cursor, retitle the terminal, or forge a row or a column.
func TestStatusInert(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	evil := "x\x1b[2J\x1b]0;pwned\x07\nc-forged\tenrolled\r\u202e"
	var b bytes.Buffer
	printStatus(&b, []wire.Candidate{{CandidateID: "c-1" + evil, NodeType: "a100" + evil, InstanceID: "i-1" + evil, PublicIP: "203.0.113.7" + evil,
		HostID: "host" + evil, State: wire.StateRunning + evil, Reason: "why" + evil, CreatedAt: now}},
		[]wire.Node{{InstanceID: "i-1" + evil, NodeType: "a100" + evil, PublicIP: "203.0.113.7" + evil, State: wire.StateEnrolled + evil,
			EnrolledAt: now, Health: wire.HealthHealthy + evil, Ray: wire.RayStatus{State: wire.RayRunning + evil, Restarts: 2}}}, now)
	got := b.String()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\t", "\u202e", "\nc-forged"} {
		if strings.Contains(got, bad) {
			t.Errorf("status output holds %q:\n%q", bad, got)
		}
	}
	if lines := strings.Count(got, "\n"); lines != 5 {
		t.Errorf("status printed %d lines, want 5 (two headers, two rows, a blank):\n%s", lines, got)
	}
	if !strings.Contains(got, "hostx?[2J?]0;pwned??c-forged?enrolled??") {
		t.Errorf("host_id not shown inert:\n%s", got)
	}
}

// TestStatusRestarts proves the node table shows Ray's restart count.
func TestStatusRestarts(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	printStatus(&b, nil, []wire.Node{{InstanceID: "i-1", NodeType: "a100", PublicIP: "203.0.113.7", State: wire.StateEnrolled,
		EnrolledAt: now, Health: wire.HealthHealthy, Ray: wire.RayStatus{State: wire.RayRunning, Restarts: 3}}}, now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	head, row := strings.Fields(lines[len(lines)-2]), strings.Fields(lines[len(lines)-1])
	i := strings.Index(strings.Join(head, " "), "RESTARTS")
	if i < 0 || len(row) < 7 || row[6] != "3" {
		t.Errorf("RESTARTS column: header %q row %q, want 3 under RESTARTS", head, row)
	}
}

// TestStatusSaysNotJoined proves the RAY column says a starting node's Ray
// has not joined once its agent reported so, and only then.
func TestStatusSaysNotJoined(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	n := wire.Node{InstanceID: "i-1", NodeType: "a100", PublicIP: "203.0.113.7", State: wire.StateEnrolled,
		EnrolledAt: now, Health: wire.HealthHealthy, Ray: wire.RayStatus{State: wire.RayStarting}}
	for _, c := range []struct {
		report *wire.RayReport
		want   bool
	}{{nil, false}, {&wire.RayReport{Event: wire.EventRayRestarted}, false}, {&wire.RayReport{Event: wire.EventRayNotJoined, Detail: "GCS unreachable"}, true}} {
		n.RayReport = c.report
		var b bytes.Buffer
		printStatus(&b, nil, []wire.Node{n}, now)
		if got := strings.Contains(b.String(), "starting (not joined)"); got != c.want {
			t.Errorf("report %+v: says not joined %v, want %v:\n%s", c.report, got, c.want, b.String())
		}
	}
}

// TestStatusShowsRentingHalted proves `head status` says why the provider
// rents nothing (vast's daily search quota, with when it resets), inert,
// and prints nothing about the provider while it rents.
func TestStatusShowsRentingHalted(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	reset := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	printProvider(&b, wire.ProviderStatus{Kind: "vast", Halted: "search_quota_exceeded", Detail: "quota\x1b[2J used up", Until: &reset}, now)
	got := b.String()
	for _, want := range []string{"RENTING HALTED", "vast: search_quota_exceeded", "until 2026-12-01T00:00:00Z (in 12h0m0s)", "quota?[2J used up"} {
		if !strings.Contains(got, want) {
			t.Errorf("status output lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	printProvider(&b, wire.ProviderStatus{Kind: "vast"}, now)
	if b.Len() != 0 {
		t.Errorf("a renting provider printed %q, want nothing", b.String())
	}
}

// TestStatusTerms: head status shows an interruptible rental's bid and
// storage and the offer at its min bid, a contract's end date, and a price increase with what
// the head did, and when an accepted one applies (the contract's end
// date); nothing for a provider without such terms.
func TestStatusTerms(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	end := now.Add(3 * time.Hour)
	var b bytes.Buffer
	printTerms(&b, []wire.RentalTerms{
		{InstanceID: "31000001", CandidateID: "c-1", BidDPH: 0.044, StorageDPH: 0.0021, OfferDPH: 0.0421},
		{InstanceID: "31000002", CandidateID: "c-2", EndDate: &end,
			PriceIncrease: &wire.PriceIncrease{OldDPH: 0.1, NewDPH: 0.2, Action: wire.PriceRejected, At: now}},
		{InstanceID: "31000003", CandidateID: "c-3", EndDate: &end,
			PriceIncrease: &wire.PriceIncrease{OldDPH: 0.1, NewDPH: 0.3, Action: wire.PriceAccepted, At: now, AppliesAt: &end}},
	}, now)
	got := b.String()
	for _, want := range []string{"BID $/H", "STORAGE $/H", "OFFER AT MIN BID $/H", "$0.044", "$0.0021", "$0.042", "2026-11-30T15:00:00Z (in 3h0m0s)", "$0.100 → $0.200/h rejected", "$0.100 → $0.300/h accepted from 2026-11-30T15:00:00Z"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	if printTerms(&b, nil, now); b.Len() != 0 {
		t.Errorf("printed %q for no terms", b.String())
	}
}

// TestRayHeadLineStale: the Ray head line flags a pid that is gone (head
// up died without stopping it).
func TestRayHeadLineStale(t *testing.T) {
	now := time.Now()
	live := rayHeadLine(rayhead.Status{State: "running", Address: "10.0.0.1:6379", PID: os.Getpid(), Since: now}, now)
	if strings.Contains(live, "gone") || !strings.HasPrefix(live, "RAY HEAD  10.0.0.1:6379  running") {
		t.Errorf("live pid: %q", live)
	}
	// A pid that cannot exist (above pid_max's ceiling of 2^22).
	stale := rayHeadLine(rayhead.Status{State: "running", Address: "10.0.0.1:6379", PID: 1<<22 + 7, Since: now}, now)
	if !strings.Contains(stale, "gone") {
		t.Errorf("stale pid: %q", stale)
	}
}
