package blocklist

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// clock is a settable time source; tests move it instead of sleeping.

func newClock() *rvtest.Clock { return rvtest.NewClock(t0) }
func entry(id, class, reason string, until time.Time) wire.BlockEntry {
	return wire.BlockEntry{HostID: id, Class: class, Reason: reason, Until: until}
}

// The classes last as long as seed 000 says.
func TestAddDurations(t *testing.T) {
	tests := []struct {
		class string
		want  wire.BlockEntry
	}{
		{wire.BlockSecurity, entry("h", wire.BlockSecurity, "r", t0.Add(30*24*time.Hour))},
		{wire.BlockNetwork, entry("h", wire.BlockNetwork, "r", t0.Add(24*time.Hour))},
		{"bogus", entry("h", wire.BlockSecurity, "r", t0.Add(30*24*time.Hour))}, // unknown = the safe side
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			c := newClock()
			l := New(c.Now)
			if got := l.Add("h", tt.class, "r"); got != tt.want {
				t.Fatalf("Add = %+v, want %+v", got, tt.want)
			}
			if got, ok := l.Blocked("h"); !ok || got != tt.want {
				t.Fatalf("Blocked = %+v, %v; want %+v, true", got, ok, tt.want)
			}
		})
	}
}

// Adding to a listed host keeps the later expiry and the stronger class.
func TestAddAgain(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name  string
		first string
		after time.Duration
		then  string
		want  wire.BlockEntry
	}{
		{"network then security", wire.BlockNetwork, time.Hour, wire.BlockSecurity,
			entry("h", wire.BlockSecurity, "second", t0.Add(time.Hour+30*day))},
		{"security then network keeps security and its expiry", wire.BlockSecurity, time.Hour, wire.BlockNetwork,
			entry("h", wire.BlockSecurity, "first", t0.Add(30*day))},
		{"security then network near its end: later expiry, stronger class", wire.BlockSecurity, 30*day - time.Hour, wire.BlockNetwork,
			entry("h", wire.BlockSecurity, "first", t0.Add(30*day-time.Hour+day))},
		{"network twice extends", wire.BlockNetwork, 12 * time.Hour, wire.BlockNetwork,
			entry("h", wire.BlockNetwork, "second", t0.Add(12*time.Hour+day))},
		{"network after the first expired starts fresh", wire.BlockSecurity, 31 * day, wire.BlockNetwork,
			entry("h", wire.BlockNetwork, "second", t0.Add(31*day+day))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			l := New(c.Now)
			l.Add("h", tt.first, "first")
			c.Add(tt.after)
			if got := l.Add("h", tt.then, "second"); got != tt.want {
				t.Fatalf("Add = %+v, want %+v", got, tt.want)
			}
			if got, _ := l.Blocked("h"); got != tt.want {
				t.Fatalf("Blocked = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Entries and Blocked forget entries at their expiry, and expired entries
// leave memory.
func TestExpiry(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	l.Add("net", wire.BlockNetwork, wire.ReasonPortCheck)
	l.Add("sec", wire.BlockSecurity, wire.ReasonSecurityCheck)
	l.Add("", wire.BlockSecurity, "ignored")

	want := []wire.BlockEntry{
		entry("net", wire.BlockNetwork, wire.ReasonPortCheck, t0.Add(24*time.Hour)),
		entry("sec", wire.BlockSecurity, wire.ReasonSecurityCheck, t0.Add(30*24*time.Hour)),
	}
	if got := l.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Entries = %+v, want %+v", got, want)
	}
	c.Add(24*time.Hour - time.Nanosecond)
	if _, ok := l.Blocked("net"); !ok {
		t.Fatal("network entry gone before its day is up")
	}
	c.Add(time.Nanosecond)
	if _, ok := l.Blocked("net"); ok {
		t.Fatal("network entry still blocks at its expiry")
	}
	if got := l.Entries(); !reflect.DeepEqual(got, want[1:]) {
		t.Fatalf("Entries = %+v, want %+v", got, want[1:])
	}
	c.Add(30 * 24 * time.Hour)
	if got := l.Entries(); len(got) != 0 {
		t.Fatalf("Entries = %+v, want none", got)
	}
	if n := len(l.m); n != 0 {
		t.Fatalf("%d expired entries still in memory", n)
	}
	if _, ok := l.Blocked(""); ok {
		t.Fatal("the empty host ID is blocked")
	}
}

// Entries come sorted by host ID.
func TestEntriesSorted(t *testing.T) {
	l := New(newClock().Now)
	for _, id := range []string{"c", "a", "b"} {
		l.Add(id, wire.BlockNetwork, wire.ReasonEgress)
	}
	var got []string
	for _, e := range l.Entries() {
		got = append(got, e.HostID)
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Entries order %v, want %v", got, want)
	}
}

// Concurrent use is safe (run with -race).
func TestConcurrent(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				id := string(rune('a' + (i+j)%5))
				l.Add(id, wire.BlockNetwork, "r")
				l.Blocked(id)
				l.Entries()
				c.Add(time.Minute)
			}
		})
	}
	wg.Wait()
}
