// Package ratelimit slows down strangers who collect refusals from the head:
// per key (a source IP) a token bucket of refusals. The first burst refusals
// are answered normally; after that the key is limited (429) until tokens
// refill, one per refillEvery.
package ratelimit

import (
	"container/list"
	"sync"
	"time"
)

// DefaultMaxKeys bounds memory: beyond it the least recently seen key is
// forgotten, which only forgives it.
const DefaultMaxKeys = 65536

// Limiter is safe for concurrent use.
type Limiter struct {
	burst   int
	every   time.Duration
	now     func() time.Time
	maxKeys int

	mu  sync.Mutex
	m   map[string]*list.Element // of *bucket
	lru *list.List               // front = most recently noted
}

type bucket struct {
	key    string
	tokens int
	last   time.Time // refilled up to here
}

// New returns a limiter allowing burst refusals per key, refilling one every
// refillEvery. burst < 1 counts as 1, refillEvery <= 0 as one second, a nil
// now as time.Now.
func New(burst int, refillEvery time.Duration, now func() time.Time) *Limiter {
	if burst < 1 {
		burst = 1
	}
	if refillEvery <= 0 {
		refillEvery = time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{burst: burst, every: refillEvery, now: now, maxKeys: DefaultMaxKeys,
		m: make(map[string]*list.Element), lru: list.New()}
}

// Refuse counts one refusal against key and reports whether it may be
// answered normally; false means key is limited (answer 429). The check and
// the count are one step, so refusals arriving at once from one key get
// exactly burst normal answers.
func (l *Limiter) Refuse(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.m[key]
	if ok {
		l.refill(el.Value.(*bucket))
		l.lru.MoveToFront(el)
	} else {
		for len(l.m) >= l.maxKeys {
			l.removeLocked(l.lru.Back())
		}
		el = l.lru.PushFront(&bucket{key: key, tokens: l.burst, last: l.now()})
		l.m[key] = el
	}
	b := el.Value.(*bucket)
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}

// refill adds the tokens earned since b.last, up to burst.
func (l *Limiter) refill(b *bucket) {
	now := l.now()
	if !now.After(b.last) { // no time passed, or the clock stepped back
		return
	}
	n := now.Sub(b.last) / l.every
	if n <= 0 {
		return
	}
	if int64(n) >= int64(l.burst-b.tokens) {
		b.tokens, b.last = l.burst, now
		return
	}
	b.tokens += int(n)
	b.last = b.last.Add(n * l.every)
}

func (l *Limiter) removeLocked(el *list.Element) {
	b := el.Value.(*bucket)
	delete(l.m, b.key)
	l.lru.Remove(el)
}

// tracked is the number of keys held (for tests of the memory bound).
func (l *Limiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
