package ratelimit

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/fakeclock"
)

// clock is a settable time source; tests move it instead of sleeping.
type clock = fakeclock.Clock

func newClock() *clock { return fakeclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) }

// refuse is what the head does with one refusal: count it, and answer 429
// if limited, else 403. It returns true for a normal answer.
func refuse(l *Limiter, key string) bool {
	return l.Refuse(key)
}

// Exactly burst refusals pass, then the key is limited.
func TestBurstThenLimited(t *testing.T) {
	for _, burst := range []int{1, 10} {
		t.Run(strconv.Itoa(burst), func(t *testing.T) {
			l := New(burst, time.Minute, newClock().Now)
			for i := range burst {
				if !refuse(l, "198.51.100.1") {
					t.Fatalf("refusal %d limited, want the first %d answered normally", i+1, burst)
				}
			}
			for i := range 5 {
				if refuse(l, "198.51.100.1") {
					t.Fatalf("refusal %d answered normally, want limited", burst+i+1)
				}
			}
		})
	}
}

// Each refill period gives back exactly one refusal, and a long pause
// restores the whole burst but no more.
func TestRefill(t *testing.T) {
	c := newClock()
	l := New(10, time.Minute, c.Now)
	for range 10 {
		l.Refuse("k")
	}
	if !l.limited("k") {
		t.Fatal("not limited after the burst")
	}
	c.Add(time.Minute - time.Nanosecond)
	if !l.limited("k") {
		t.Fatal("a token came back before the period was over")
	}
	c.Add(time.Nanosecond)
	if !refuse(l, "k") {
		t.Fatal("no token after one period")
	}
	if refuse(l, "k") {
		t.Fatal("two tokens after one period")
	}
	c.Add(3*time.Minute + 30*time.Second) // 3.5 periods: 3 tokens, half a period kept
	for i := range 3 {
		if !refuse(l, "k") {
			t.Fatalf("token %d of 3 missing", i+1)
		}
	}
	if refuse(l, "k") {
		t.Fatal("a fourth token after 3.5 periods")
	}
	c.Add(30 * time.Second) // the kept half period completes
	if !refuse(l, "k") {
		t.Fatal("the partial period was lost")
	}
	c.Add(time.Hour)
	got := 0
	for refuse(l, "k") {
		got++
	}
	if got != 10 {
		t.Fatalf("after a long pause %d refusals passed, want the burst of 10", got)
	}
}

// Keys do not share buckets.
func TestKeysIndependent(t *testing.T) {
	l := New(10, time.Minute, newClock().Now)
	for range 10 {
		l.Refuse("a")
	}
	if !l.limited("a") {
		t.Fatal("a not limited")
	}
	if l.limited("b") {
		t.Fatal("b limited by a's refusals")
	}
	for i := range 10 {
		if !refuse(l, "b") {
			t.Fatalf("b's refusal %d limited", i+1)
		}
	}
}

// A clock that steps back neither refills nor breaks the bucket.
func TestClockBackwards(t *testing.T) {
	c := newClock()
	l := New(2, time.Minute, c.Now)
	l.Refuse("k")
	l.Refuse("k")
	c.Add(-time.Hour)
	if !l.limited("k") {
		t.Fatal("a backwards step refilled the bucket")
	}
}

// 100k distinct keys never hold more than the cap, and a key just noted is
// still tracked (the evicted ones are the least recently seen).
func TestMemoryBound(t *testing.T) {
	l := New(10, time.Minute, newClock().Now)
	for i := range 100_000 {
		l.Refuse("10.0." + strconv.Itoa(i))
		if n := l.tracked(); n > DefaultMaxKeys {
			t.Fatalf("after %d keys %d are tracked, cap %d", i+1, n, DefaultMaxKeys)
		}
	}
	if n, lru := l.tracked(), l.lru.Len(); n != DefaultMaxKeys || lru != n {
		t.Fatalf("tracked %d (lru %d), want %d", n, lru, DefaultMaxKeys)
	}
	for range 9 {
		l.Refuse("10.0.99999")
	}
	if !l.limited("10.0.99999") {
		t.Fatal("the most recent key was evicted")
	}
}

// A bucket that refilled completely is dropped: idle keys do not stay in
// memory.
func TestFullBucketsDropped(t *testing.T) {
	c := newClock()
	l := New(10, time.Minute, c.Now)
	l.Refuse("k")
	c.Add(time.Minute)
	if l.limited("k") {
		t.Fatal("limited after refill")
	}
	if n := l.tracked(); n != 0 {
		t.Fatalf("%d keys tracked after a full refill, want 0", n)
	}
}

// Concurrent use is safe (run with -race).
func TestConcurrent(t *testing.T) {
	c := newClock()
	l := New(10, time.Second, c.Now)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 500 {
				k := strconv.Itoa((i + j) % 7)
				refuse(l, k)
				c.Add(time.Millisecond * 100)
			}
		})
	}
	wg.Wait()
}

// At the cap the least recently noted key goes, not one still active.
func TestEvictsLeastRecent(t *testing.T) {
	l := New(2, time.Minute, newClock().Now)
	l.maxKeys = 3
	for _, k := range []string{"a", "b", "c"} {
		l.Refuse(k)
	}
	l.Refuse("a") // a is now limited and the most recent
	l.Refuse("d") // evicts b
	if _, ok := l.m["b"]; ok {
		t.Fatal("b, the least recently noted, was kept")
	}
	if !l.limited("a") {
		t.Fatal("a was evicted instead of b")
	}
	if n := l.tracked(); n != 3 {
		t.Fatalf("tracked %d, want 3", n)
	}
}

// Refuse checks and counts in one step: of many refusals at once from one
// key exactly burst are answered normally.
func TestRefuseAtomic(t *testing.T) {
	for range 20 {
		l := New(10, time.Minute, newClock().Now)
		start := make(chan struct{})
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				<-start
				if l.Refuse("k") {
					ok.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := ok.Load(); got != 10 {
			t.Fatalf("%d refusals answered normally, want exactly 10", got)
		}
		if !l.limited("k") {
			t.Fatal("not limited after the burst")
		}
	}
}
