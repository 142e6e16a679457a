package fakevast

import (
	"net/http"
	"strings"
	"time"
)

// Limit is one endpoint's rate limit at vast: a minimum interval between two
// requests of one caller, or at most Calls in Per; after a 429 the caller
// waits Penalty more (README: x-rate-limit of the API reference pages).
type Limit struct {
	Interval time.Duration
	Calls    int
	Per      time.Duration
	Penalty  time.Duration
}

// Limits maps an endpoint name (see endpointName) to its limit.
type Limits map[string]Limit

// VastLimits are the API reference's: create 4.5 s with a 12 s penalty, show
// instance 2 s, destroy 3 s, list (v0 and v1) 1 s, search 10 a minute; and
// 2 s on each price-increase endpoint (x-rateLimit 2.0 of
// auto_get_api_v0_instances_pending_price_increases,
// auto_put_api_v0_instances_accept_price_increase and
// auto_put_api_v0_instances_reject_price_increase, the specs vast-ai/docs
// generates from vast's backend, commit 4c1c657).
func VastLimits() Limits {
	return Limits{
		"create":        {Interval: 4500 * time.Millisecond, Penalty: 12 * time.Second},
		"show":          {Interval: 2 * time.Second},
		"destroy":       {Interval: 3 * time.Second},
		"list":          {Interval: time.Second},
		"search":        {Calls: 10, Per: time.Minute},
		"price_pending": {Interval: 2 * time.Second},
		"price_accept":  {Interval: 2 * time.Second},
		"price_reject":  {Interval: 2 * time.Second},
	}
}

// Scale multiplies every duration by f (tests keep vast's ratios, faster).
func (l Limits) Scale(f float64) Limits {
	out := Limits{}
	for k, v := range l {
		v.Interval = time.Duration(float64(v.Interval) * f)
		v.Per = time.Duration(float64(v.Per) * f)
		v.Penalty = time.Duration(float64(v.Penalty) * f)
		out[k] = v
	}
	return out
}

// endpointName classes a request as vast limits it: every search form
// shares "search", every instance ID shares one limit.
func endpointName(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/v0/bundles") || strings.HasPrefix(p, "/api/v0/search/asks"):
		return "search"
	case strings.HasPrefix(p, "/api/v0/asks/"):
		return "create"
	case strings.HasSuffix(p, "/pending-price-increases/"):
		return "price_pending"
	case strings.HasSuffix(p, "/accept-price-increase/"):
		return "price_accept"
	case strings.HasSuffix(p, "/reject-price-increase/"):
		return "price_reject"
	case p == "/api/v0/instances/" || p == "/api/v1/instances/":
		return "list"
	case strings.HasPrefix(p, "/api/v0/instances/") && r.Method == http.MethodDelete:
		return "destroy"
	case strings.HasPrefix(p, "/api/v0/instances/"):
		return "show"
	}
	return r.Method + " " + endpoint(p)
}

// limiter keeps each endpoint's history; the caller holds the Server's mu.
type limiter struct {
	lim     Limits
	last    map[string]time.Time
	window  map[string][]time.Time
	blocked map[string]time.Time // penalty: refused until then
}

func newLimiter(l Limits) *limiter {
	return &limiter{lim: l, last: map[string]time.Time{}, window: map[string][]time.Time{}, blocked: map[string]time.Time{}}
}

// allow records a request to ep at now and says whether vast would serve it.
// A refused request still counts (vast's limit is on requests, not answers).
func (l *limiter) allow(ep string, now time.Time) bool {
	lim, ok := l.lim[ep]
	if !ok {
		return true
	}
	ok = now.After(l.blocked[ep]) || l.blocked[ep].IsZero()
	if lim.Interval > 0 {
		if prev, seen := l.last[ep]; seen && now.Sub(prev) < lim.Interval {
			ok = false
		}
		l.last[ep] = now
	}
	if lim.Calls > 0 {
		w := l.window[ep][:0]
		for _, t := range l.window[ep] {
			if now.Sub(t) < lim.Per {
				w = append(w, t)
			}
		}
		if len(w) >= lim.Calls {
			ok = false
		} else {
			w = append(w, now)
		}
		l.window[ep] = w
	}
	if !ok && lim.Penalty > 0 {
		l.blocked[ep] = now.Add(lim.Penalty)
	}
	return ok
}
