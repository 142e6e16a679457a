package vast

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// youngFor is how long after its create an instance missing from the
// listing counts as "not listed yet" rather than gone.
const youngFor = 30 * time.Second

// lister is the batched listing: every Get within `every` of the last
// listing reads it; the first after that lists again (one v1 listing, all
// pages) while the others wait for it.
type lister struct {
	c     *Client
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex // held while listing
	at   time.Time
	ins  []Instance
	byID map[int64]Instance

	bmu   sync.Mutex
	birth map[int64]time.Time // our creates, for "not listed yet"
}

func (l *lister) fetch(ctx context.Context) error {
	ins, err := l.c.ListInstances(ctx)
	if err != nil {
		return err
	}
	l.at, l.ins = l.now(), ins
	l.byID = make(map[int64]Instance, len(ins))
	for _, in := range ins {
		l.byID[in.ID] = in
	}
	l.bmu.Lock()
	for id, t := range l.birth {
		if _, ok := l.byID[id]; ok || l.now().Sub(t) > youngFor {
			delete(l.birth, id)
		}
	}
	l.bmu.Unlock()
	return nil
}

// refresh lists now (List, the leak sweep, always reads a new listing).
func (l *lister) refresh(ctx context.Context) ([]Instance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.fetch(ctx); err != nil {
		return nil, err
	}
	return l.ins, nil
}

// get returns the listing (fetched when older than every), the instance id
// in it (nil when absent) and whether id was created too recently to be
// missing for good.
func (l *lister) get(ctx context.Context, id int64) (all []Instance, in *Instance, young bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil || l.now().Sub(l.at) >= l.every {
		if err := l.fetch(ctx); err != nil {
			return nil, nil, false, err
		}
	}
	if x, ok := l.byID[id]; ok {
		return l.ins, &x, false, nil
	}
	return l.ins, nil, l.isYoung(id), nil
}

func (l *lister) isYoung(id int64) bool {
	l.bmu.Lock()
	defer l.bmu.Unlock()
	t, ok := l.birth[id]
	return ok && l.now().Sub(t) <= youngFor
}

func (l *lister) created(id int64) {
	l.bmu.Lock()
	defer l.bmu.Unlock()
	if l.birth == nil {
		l.birth = map[int64]time.Time{}
	}
	l.birth[id] = l.now()
}

// invalidate makes the next Get list again (after a destroy).
func (l *lister) invalidate() {
	l.mu.Lock()
	l.at = time.Time{}
	l.mu.Unlock()
}

// offerTTL is how long one search's offers serve further Rents.
const offerTTL = 15 * time.Second

// searchLimit is how many offers one search asks for: enough for a burst
// of Rents (search is limited to 10 a minute, create to one per 4.5 s).
const searchLimit = 64

// offerCache is the last search's answer.
type offerCache struct {
	key    string
	at     time.Time
	offers []Offer
	taken  map[int64]bool // offers a Rent already tried
}

func cacheKey(q Query) string {
	return fmt.Sprintf("%s|%d|%g|%d|%g|%t|%s", q.GPUName, q.NumGPUs, q.MaxDPH, q.MinPorts, q.DiskGB, q.Bid, q.Filters.key())
}

// pick returns the cheapest usable offer for q, searching when the last
// search's offers are stale or used up (one search at a time); nil when
// vast has none. The offer's machine is reserved until release.
func (p *Provider) pick(ctx context.Context, q Query) (*Offer, error) {
	if o := p.takeCached(q); o != nil {
		return o, nil
	}
	p.searchMu.Lock()
	defer p.searchMu.Unlock()
	if o := p.takeCached(q); o != nil {
		return o, nil // another Rent searched meanwhile
	}
	offers, err := p.cfg.Client.SearchOffers(ctx, q)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.offers = offerCache{key: cacheKey(q), at: p.cfg.Now(), offers: offers, taken: map[int64]bool{}}
	p.mu.Unlock()
	return p.takeCached(q), nil
}

func (p *Provider) takeCached(q Query) *Offer {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &p.offers
	if c.key != cacheKey(q) || p.cfg.Now().Sub(c.at) > offerTTL {
		return nil
	}
	hosts, machines := set(q.ExcludeHosts), set(q.ExcludeMachine)
	for _, m := range p.live {
		machines[m] = true
	}
	for m := range p.foreign {
		machines[m] = true
	}
	for i := range c.offers {
		o := c.offers[i]
		if c.taken[o.ID] || hosts[o.HostID] || machines[o.MachineID] || p.renting[o.MachineID] {
			continue
		}
		c.taken[o.ID] = true
		p.renting[o.MachineID] = true
		return &o
	}
	return nil
}

// release ends a Rent's reservation of a machine; id > 0 is the instance
// now live on it.
func (p *Provider) release(machine, id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.renting, machine)
	if id > 0 {
		p.live[id] = machine
	}
}

// track makes the live machines those of our instances in a listing (plus
// instances created too recently to be listed).
func (p *Provider) track(ins []Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	listed := map[int64]bool{}
	p.foreign = map[int64]bool{}
	for _, in := range ins {
		label := in.LabelText()
		switch {
		case in.MachineID <= 0:
		case strings.HasPrefix(label, p.prefix):
			p.live[in.ID] = in.MachineID
			listed[in.ID] = true
		case strings.HasPrefix(label, anyRayvast) && !vanishedStatus[in.Status()]:
			// Another head's rental on this account (SOURCES.md: two
			// heads, one account): its machine is not ours to rent.
			p.foreign[in.MachineID] = true
		}
	}
	for id := range p.live {
		if !listed[id] && !p.list.isYoung(id) {
			delete(p.live, id)
		}
	}
}

func (p *Provider) forget(id int64) {
	p.mu.Lock()
	delete(p.live, id)
	p.mu.Unlock()
}

// liveMachines lists the machines holding our live instances, sorted.
func (p *Provider) liveMachines() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[int64]bool{}
	var out []int64
	for _, m := range p.live {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
