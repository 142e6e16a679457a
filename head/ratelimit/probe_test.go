package ratelimit

// limited reports whether key has used up its refusals: the head answers 429
// instead of refusing again. A key never counted is not limited. Tests probe
// with it; the head itself only calls Refuse, which checks and counts at once.
func (l *Limiter) limited(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.m[key]
	if !ok {
		return false
	}
	b := el.Value.(*bucket)
	l.refill(b)
	if b.tokens >= l.burst { // full again: the same as never seen
		l.removeLocked(el)
		return false
	}
	return b.tokens == 0
}
