package vast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Environment variables the head reads the settings from
// (head/provider_settings.go); named here so tools that start a head set them.
const (
	EnvAPIKey     = "VAST_API_KEY"              // Config.Key (removed from the head's env once read)
	EnvAPIKeyFile = "RAYVAST_VAST_API_KEY_FILE" // or a file holding it (else Settings.APIKeyFile)
	EnvBaseURL    = "RAYVAST_VAST_URL"          // Settings.BaseURL; tools/fakevast for tests
	EnvSettings   = "RAYVAST_VAST_CONFIG"       // JSON Settings file, when the config has no provider block
)

// Settings say what to rent per node type: the config's provider block
// (wire.ProviderConfig), also read from the JSON file named by
// RAYVAST_VAST_CONFIG (its "kind" may be left out). Every field is optional.
type Settings = wire.ProviderConfig

// OfferSpec narrows the offer search of one node type. The GPU count is the
// node type's gpus.
type OfferSpec = wire.OfferSpec

// DefaultImage runs the bootloader when Settings name none: it has python3
// (Ray's images are the usual choice; set "image").
const DefaultImage = "rayproject/ray:latest-gpu"

// Blocklist is what the provider reads of the head's blocklist: the host IDs
// it must not rent on (head/blocklist.List satisfies it).
type Blocklist interface {
	Entries() []wire.BlockEntry
}

// Config builds a Provider.
type Config struct {
	Cluster  string
	Settings Settings
	// Key is the account's API key; never logged nor put in a rental.
	Key secret.String
	// Client talks to vast (tests give one); nil: made from
	// Settings.BaseURL, Key and Settings.IntervalsS.
	Client    *Client
	Blocklist Blocklist // nil: nothing blocked
	Log       *slog.Logger
	// ListEvery is how old the batched listing that answers Get may be
	// (default 5 s, the reconcile tick): pending rentals share one v1
	// listing instead of one show each.
	ListEvery time.Duration
	Now       func() time.Time
}

// Provider rents instances on vast.ai.
type Provider struct {
	cfg    Config
	prefix string // label prefix of this cluster's rentals
	log    *slog.Logger
	list   *lister

	mu       sync.Mutex
	machines map[int64]map[int64]bool // host_id → machine_ids seen on it
	live     map[int64]int64          // our instance → its machine (one node per machine)
	renting  map[int64]bool           // machines a Rent in flight is creating on
	offers   offerCache

	destroying map[int64]*flight
	destroyed  map[int64]bool

	avoid   map[int64]time.Time // machines not to rent on until then (started an instance stopped)
	avoidH  map[int64]time.Time // hosts likewise (blacklisted this account)
	foreign map[int64]bool      // machines holding another rayvast rental of this account
	halt    halt

	terms    map[int64]*wire.RentalTerms // bids, end dates, price increases (terms.go)
	ending   map[int64]endAt             // instances to end at a time (EndPriceIncrease)
	pricesAt time.Time                   // last poll of pending price increases
	acct     Account                     // the account as last read (account.go)
	acctAt   time.Time

	searchMu sync.Mutex // one search at a time: a burst of Rents shares it
}

var _ provider.Provider = (*Provider)(nil)

// limitsFrom applies the settings' intervals_s to vast's default limits.
func limitsFrom(iv map[string]float64) (Limits, error) {
	lim := DefaultLimits()
	for ep, sec := range iv {
		if _, known := lim.Interval[ep]; !known {
			return lim, fmt.Errorf("vast provider: intervals_s: unknown endpoint %q (want search, create, show, list, destroy or price_increase)", ep)
		}
		if !(sec >= 0 && sec <= 600) {
			return lim, fmt.Errorf("vast provider: intervals_s.%s: %g s, want 0-600", ep, sec)
		}
		lim.Interval[ep] = time.Duration(sec * float64(time.Second))
	}
	return lim, nil
}

// New builds the provider from typed settings (the head parses its
// config's provider block, RAYVAST_VAST_CONFIG and the environment into
// them).
func New(cfg Config) (*Provider, error) {
	if cfg.Settings.Kind != "" && cfg.Settings.Kind != wire.ProviderVast {
		return nil, fmt.Errorf("vast provider: provider kind %q is not vast", cfg.Settings.Kind)
	}
	if cfg.Cluster == "" {
		return nil, errors.New("vast provider: no cluster name")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	for n, o := range cfg.Settings.NodeTypes {
		if b := o.Interruptible; b != nil {
			if err := b.Check(); err != nil { // RAYVAST_VAST_CONFIG is not checked by the head's config
				return nil, fmt.Errorf("vast provider: node_types.%s.%w", n, err)
			}
		}
	}
	if cfg.Client == nil {
		if cfg.Key.IsZero() {
			return nil, errors.New("vast provider: no API key")
		}
		lim, err := limitsFrom(cfg.Settings.IntervalsS)
		if err != nil {
			return nil, err
		}
		c, err := NewClient(ClientConfig{BaseURL: cfg.Settings.BaseURL, Key: cfg.Key, Log: cfg.Log, Limits: &lim})
		if err != nil {
			return nil, fmt.Errorf("vast provider: %w", err)
		}
		cfg.Client = c
	}
	if cfg.ListEvery <= 0 {
		cfg.ListEvery = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Provider{cfg: cfg, prefix: LabelPrefix(cfg.Cluster), log: cfg.Log, machines: map[int64]map[int64]bool{},
		live: map[int64]int64{}, renting: map[int64]bool{}, destroying: map[int64]*flight{}, destroyed: map[int64]bool{},
		avoid: map[int64]time.Time{}, avoidH: map[int64]time.Time{}, foreign: map[int64]bool{},
		terms: map[int64]*wire.RentalTerms{}, ending: map[int64]endAt{}}
	p.list = &lister{c: cfg.Client, every: cfg.ListEvery, now: cfg.Now}
	p.log.Info("vast provider ready", "base_url", cfg.Client.base.String(), "label_prefix", p.prefix, "node_types", len(cfg.Settings.NodeTypes))
	return p, nil
}

// LabelPrefix starts the label of every rental of a cluster; the candidate
// ID follows it, so a restarted head maps rentals back to candidates.
func LabelPrefix(cluster string) string { return "rayvast:" + cluster + ":" }

// Name implements provider.Provider.
func (p *Provider) Name() string { return "vast" }

// PortEnv returns the 64 port requests of docs/protocol.md §2 as vast's env keys
// ("-p 70000:70000" … "-p 70063:70063"): numbers above 70000 ask vast for a
// random port whose inside and outside numbers are equal, announced to the
// container as VAST_TCP_PORT_7000N.
func PortEnv() map[string]string {
	m := make(map[string]string, wire.PortCount)
	for i := 0; i < wire.PortCount; i++ {
		n := strconv.Itoa(wire.VastPortBase + i)
		m["-p "+n+":"+n] = "1"
	}
	return m
}

// spec is the offer spec of a node type with defaults applied.
func (p *Provider) spec(nodeType string) OfferSpec { return NodeSpec(p.cfg.Settings, nodeType) }

// NodeSpec is the offer spec of nodeType under st with defaults applied:
// its image is the one a rental of it runs.
func NodeSpec(st Settings, nodeType string) OfferSpec {
	s := st.NodeTypes[nodeType]
	if s.Image == "" {
		s.Image = st.Image
	}
	if s.Image == "" {
		s.Image = DefaultImage
	}
	if s.DiskGB == 0 {
		s.DiskGB = st.DiskGB
	}
	if s.DiskGB == 0 {
		s.DiskGB = 16
	}
	s.GPUName = GPUName(s.GPUName)
	return s
}

// excluded lists the blocked host IDs and every machine seen on them.
func (p *Provider) excluded() (hosts, machines []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hosts = append(hosts, p.avoided(p.avoidH)...)
	machines = append(machines, p.avoided(p.avoid)...)
	for m := range p.foreign {
		machines = append(machines, m)
	}
	defer func() {
		sort.Slice(hosts, func(i, j int) bool { return hosts[i] < hosts[j] })
		sort.Slice(machines, func(i, j int) bool { return machines[i] < machines[j] })
	}()
	if p.cfg.Blocklist == nil {
		return hosts, machines
	}
	for _, e := range p.cfg.Blocklist.Entries() {
		h, err := strconv.ParseInt(e.HostID, 10, 64)
		if err != nil {
			continue // not a vast host ID
		}
		hosts = append(hosts, h)
		for m := range p.machines[h] {
			machines = append(machines, m)
		}
	}
	sort.Slice(machines, func(i, j int) bool { return machines[i] < machines[j] })
	return hosts, machines
}

func (p *Provider) seen(host, machine int64) {
	if host == 0 || machine == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.machines[host] == nil {
		p.machines[host] = map[int64]bool{}
	}
	p.machines[host][machine] = true
}

// offersTried bounds how many offers one Rent tries when vast refuses them
// (another renter was faster).
const offersTried = 10

// Rent implements provider.Provider: find offers (one search serves the
// Rents of a burst), then accept the cheapest that vast still grants, never
// on a machine that holds a live rental of this cluster.
func (p *Provider) Rent(ctx context.Context, req provider.RentRequest) (provider.Rental, error) {
	if req.Command == "" {
		return provider.Rental{}, errors.New("vast rent: no command (bootloader.sh text)")
	}
	spec := p.spec(req.NodeType)
	env := PortEnv()
	for k, v := range req.Env {
		env[k] = v
	}
	// The CLI's --entrypoint /bin/sh --args -c TEXT: onstart overrides the
	// image's ENTRYPOINT, args go to it (SOURCES.md: create).
	// cancel_unavail true on purpose, bids included (their documented
	// default is false): a create that cannot start at once is answered
	// 410 and nothing is made, instead of a stopped instance that bills
	// storage until a destroy (one more 3 s slot) ends it.
	body := CreateRequest{
		ClientID: "me", Image: spec.Image, Label: p.prefix + req.CandidateID, Disk: spec.DiskGB,
		Runtype: "args", Env: env, Onstart: "/bin/sh", Args: []string{"-c", req.Command},
		TargetState: "running", CancelUnavail: true,
	}
	if err := body.Check(); err != nil {
		return provider.Rental{}, fmt.Errorf("vast rent %s: %w", req.CandidateID, err)
	}
	if err := p.halted(); err != nil {
		return provider.Rental{}, fmt.Errorf("vast rent %s: %w", req.CandidateID, err)
	}
	// The listing (at most ListEvery old) names the machines other heads
	// of this account hold: they are not searched.
	ins, _, _, err := p.list.get(ctx, 0)
	if err != nil {
		p.note(err)
		return provider.Rental{}, fmt.Errorf("vast rent %s: %w", req.CandidateID, err)
	}
	p.track(ins)
	var lastErr error
	for tried := 0; tried < offersTried; tried++ {
		q := p.query(spec, req)
		o, err := p.pick(ctx, q)
		body.Price = nil
		if err != nil {
			p.note(err)
			return provider.Rental{}, fmt.Errorf("vast rent %s: %w", req.CandidateID, err)
		}
		if o == nil {
			if lastErr != nil {
				return provider.Rental{}, fmt.Errorf("vast rent %s: every offer refused: %w", req.CandidateID, lastErr)
			}
			return provider.Rental{}, fmt.Errorf("vast rent %s: no offer for %d× %q at ≤ $%.3f/h with ≥ %d ports outside %d blocked hosts and %d machines", req.CandidateID, req.GPUs, spec.GPUName, q.MaxDPH, q.MinPorts, len(q.ExcludeHosts), len(q.ExcludeMachine))
		}
		p.seen(o.HostID, o.MachineID)
		bid, storage := 0.0, 0.0
		if b := spec.Interruptible; b != nil {
			// The bid pays the GPUs; the storage is billed on top of it,
			// so what max_dph_total leaves must hold both.
			storage = StorageDPH(o.StorageCost, spec.DiskGB)
			cap := b.MaxBidDPH
			if req.MaxDPH > 0 {
				cap = min(cap, req.MaxDPH-storage)
			}
			var ok bool
			if bid, ok = b.Bid(o.MinBid, cap); cap <= 0 || !ok {
				p.release(o.MachineID, 0)
				continue // min_bid (with the storage) above the cap
			}
			body.Price = &bid
		}
		id, err := p.cfg.Client.CreateInstance(ctx, o.ID, body)
		if errors.Is(err, ErrStopped) {
			p.release(o.MachineID, 0)
			p.stoppedCreate(ctx, req.CandidateID, *o, id, bid)
			lastErr = err
			continue
		}
		if p.note(err) {
			p.release(o.MachineID, 0)
			return provider.Rental{}, fmt.Errorf("vast rent %s: %w", req.CandidateID, err)
		}
		var ae *APIError
		isAPI := errors.As(err, &ae)
		if errors.Is(err, ErrOfferGone) || isAPI && ae.Status/100 == 4 && ae.Status != 401 && ae.Status != 403 && ae.Status != 429 {
			p.release(o.MachineID, 0)
			if isAPI && ae.Status == 400 && strings.Contains(strings.ToLower(ae.Msg), "blacklist") {
				p.avoidFor(p.avoidH, o.HostID, avoidFor) // the host refuses the account on all its machines
			}
			if isAPI && ae.Status == 410 && bid == 0 {
				// cancel_unavail: the machine could not start it at once
				// (or was taken): skipped like a stopped start. A bid's
				// 410 is a min_bid risen: the next search shows it.
				p.avoidFor(p.avoid, o.MachineID, avoidFor)
			}
			p.log.Warn("vast offer refused, trying the next", "candidate", req.CandidateID, "offer", o.ID, "err", err)
			lastErr = err
			continue
		}
		if err != nil {
			p.release(o.MachineID, 0)
			return provider.Rental{}, fmt.Errorf("vast rent %s: %w", req.CandidateID, err)
		}
		p.release(o.MachineID, id)
		p.list.created(id)
		p.rented(id, req.CandidateID, *o, bid, storage)
		iid := strconv.FormatInt(id, 10)
		r := provider.Rental{CandidateID: req.CandidateID, InstanceID: iid, HostID: strconv.FormatInt(o.HostID, 10), DPHTotal: o.DPHTotal, EndsAt: epochTime(o.EndDate)}
		if bid > 0 {
			r.DPHTotal = bid + storage // max_dph_total counts what it costs
		}
		p.log.Info("vast rented", "candidate", req.CandidateID, "instance", iid, "offer", o.ID, "host", o.HostID, "machine", o.MachineID, "gpu", o.GPUName,
			"dph_total", r.DPHTotal, "bid", bid > 0, "storage_dph", storage, "offer_dph", o.DPHTotal, "min_bid", o.MinBid)
		return r, nil
	}
	return provider.Rental{}, fmt.Errorf("vast rent %s: every offer refused: %w", req.CandidateID, lastErr)
}

// avoidFor is how long a machine that started an instance stopped (or a
// host that blacklisted the account) is skipped.
const avoidFor = time.Hour

// stoppedCreate ends an instance vast started stopped (it bills its
// storage) at once and skips its machine; the next offer is tried. A bid
// that started stopped was below the machine's min_bid by then (another
// renter bid higher meanwhile): the machine is not skipped, the next
// search shows its new min_bid.
func (p *Provider) stoppedCreate(ctx context.Context, cand string, o Offer, id int64, bid float64) {
	if bid > 0 {
		p.log.Warn("vast started the bid stopped (outbid at once); destroying it and trying the next offer", "candidate", cand,
			"instance", id, "offer", o.ID, "machine", o.MachineID, "host", o.HostID, "bid", bid, "min_bid", o.MinBid)
	} else {
		p.avoidFor(p.avoid, o.MachineID, avoidFor)
		p.log.Warn("vast started the instance stopped; destroying it and skipping its machine", "candidate", cand,
			"instance", id, "offer", o.ID, "machine", o.MachineID, "host", o.HostID, "skip_for", avoidFor.String())
	}
	if err := p.Destroy(ctx, strconv.FormatInt(id, 10)); err != nil {
		// The label names the candidate: the leak sweep destroys it once
		// the candidate holds another instance or ends.
		p.log.Error("vast: destroy of a stopped instance failed; the leak sweep will retry", "instance", id, "err", err)
	}
}

func (p *Provider) avoidFor(m map[int64]time.Time, id int64, d time.Duration) {
	p.mu.Lock()
	m[id] = p.cfg.Now().Add(d)
	p.mu.Unlock()
}

// avoided lists the ids of m still to skip (expired ones dropped); the
// caller holds p.mu.
func (p *Provider) avoided(m map[int64]time.Time) []int64 {
	var out []int64
	now := p.cfg.Now()
	for id, t := range m {
		if now.Before(t) {
			out = append(out, id)
		} else {
			delete(m, id)
		}
	}
	return out
}

// query is the offer search of one rental: the node type's spec, the
// rental's own price cap (the cluster budget left), 64 direct ports, the
// disk asked for, and the blocked hosts and machines.
func (p *Provider) query(spec OfferSpec, req provider.RentRequest) Query {
	maxDPH := spec.MaxDPH
	if req.MaxDPH > 0 && (maxDPH == 0 || req.MaxDPH < maxDPH) {
		maxDPH = req.MaxDPH
	}
	if b := spec.Interruptible; b != nil {
		maxDPH = b.MaxBidDPH // min_bid at most the bid cap (or what the budget leaves)
		if req.MaxDPH > 0 && req.MaxDPH < maxDPH {
			maxDPH = req.MaxDPH
		}
	}
	hosts, machines := p.excluded()
	machines = append(machines, p.liveMachines()...) // one node per machine
	return Query{GPUName: spec.GPUName, NumGPUs: req.GPUs, MaxDPH: maxDPH, MinPorts: wire.PortCount, DiskGB: spec.DiskGB,
		ExcludeHosts: hosts, ExcludeMachine: machines, Limit: searchLimit, Filters: p.filters(req.NodeType, spec.Image),
		Bid: spec.Interruptible != nil}
}

func parseID(instanceID string) (int64, error) {
	id, err := strconv.ParseInt(instanceID, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("vast: instance id %q is not a vast instance number", instanceID)
	}
	return id, nil
}

// rental maps an instance of ours to a Rental; ok false when not ours.
func (p *Provider) rental(in Instance) (provider.Rental, bool) {
	label := in.LabelText()
	cand, ok := strings.CutPrefix(label, p.prefix)
	// The rest must be one candidate ID: cluster "a" must not take the
	// rentals of cluster "a:b" (label "rayvast:a:b:c-…") for its own.
	if !ok || !wire.ValidInstanceID(cand) || in.ID <= 0 {
		return provider.Rental{}, false
	}
	p.seen(in.HostID, in.MachineID)
	r := provider.Rental{CandidateID: cand, InstanceID: strconv.FormatInt(in.ID, 10), DPHTotal: in.DPHTotal}
	if in.HostID > 0 {
		r.HostID = strconv.FormatInt(in.HostID, 10)
	}
	if vanishedStatus[in.Status()] {
		r.Vanished = in.Status()
	}
	p.applyTerms(in, &r)
	if in.Status() == "running" && in.PublicIPAddr != "" {
		ip, err := netip.ParseAddr(strings.TrimSpace(in.PublicIPAddr))
		if err != nil {
			p.log.Warn("vast: instance's public_ipaddr is not an IP; not running yet", "instance", r.InstanceID, "public_ipaddr", strconv.QuoteToASCII(cut(in.PublicIPAddr, 64)))
			return r, true
		}
		r.PublicIP, r.Running = ip.Unmap().WithZone("").String(), true
	}
	return r, true
}

// vanishedStatus are the actual_status values of an instance that does not
// run and will not by itself: its container exited, its host went offline
// or is unknown to vast, or it was stopped (SOURCES.md).
var vanishedStatus = map[string]bool{"exited": true, "offline": true, "unknown": true, "stopped": true}

// anyRayvast starts the label of every rayvast rental, whatever the cluster.
const anyRayvast = "rayvast:"

// yielders are the instances of a listing that must give their machine
// up: on each machine the rayvast rental with the lowest ID keeps it
// (vast sells one offer twice when two creates race, SOURCES.md). Every
// head on the account reads the same listing, so they agree.
func yielders(ins []Instance) map[int64]bool {
	keep := map[int64]int64{} // machine → lowest rayvast instance ID
	for _, in := range ins {
		if strings.HasPrefix(in.LabelText(), anyRayvast) && in.MachineID > 0 && !vanishedStatus[in.Status()] {
			if k, ok := keep[in.MachineID]; !ok || in.ID < k {
				keep[in.MachineID] = in.ID
			}
		}
	}
	out := map[int64]bool{}
	for _, in := range ins {
		if k, ok := keep[in.MachineID]; ok && strings.HasPrefix(in.LabelText(), anyRayvast) && !vanishedStatus[in.Status()] && in.ID != k {
			out[in.ID] = true
		}
	}
	return out
}

// Get implements provider.Provider from the batched listing (one v1
// listing serves every pending rental for ListEvery); an instance missing
// from a fresh listing is shown once to tell "gone" from "not listed yet".
func (p *Provider) Get(ctx context.Context, instanceID string) (provider.Rental, error) {
	id, err := parseID(instanceID)
	if err != nil {
		return provider.Rental{}, provider.ErrGone
	}
	ins, listed, young, err := p.list.get(ctx, id)
	if err != nil {
		p.note(err)
		return provider.Rental{}, fmt.Errorf("vast get %s: %w", instanceID, err)
	}
	p.track(ins)
	var in Instance
	switch {
	case listed != nil:
		in = *listed
	case young:
		return provider.Rental{InstanceID: instanceID}, nil // created moments ago: not listed yet
	default:
		in, err = p.cfg.Client.ShowInstance(ctx, id)
		if errors.Is(err, ErrNotFound) {
			p.forget(id)
			return provider.Rental{}, provider.ErrGone
		}
		if err != nil {
			return provider.Rental{}, fmt.Errorf("vast get %s: %w", instanceID, err)
		}
	}
	r, ok := p.rental(in)
	if !ok || in.ID != id {
		return provider.Rental{}, provider.ErrGone // not this cluster's
	}
	r.Yield = yielders(ins)[id]
	return r, nil
}

// Destroy implements provider.Provider. Destroys of one instance share
// one request (the driver and the leak sweep both destroy at head down),
// and an instance this provider destroyed is not destroyed again: each
// destroy costs a slot of vast's 3 s interval.
func (p *Provider) Destroy(ctx context.Context, instanceID string) error {
	id, err := parseID(instanceID)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.destroyed[id] {
		p.mu.Unlock()
		return nil
	}
	f := p.destroying[id]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		p.destroying[id] = f
		p.mu.Unlock()
		f.err = p.destroy(ctx, id, instanceID)
		p.mu.Lock()
		delete(p.destroying, id)
		if f.err == nil {
			p.destroyed[id] = true
		}
		close(f.done)
		p.mu.Unlock()
		return f.err
	}
	p.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("vast destroy %s: %w", instanceID, ctx.Err())
	}
}

// flight is one destroy in progress.
type flight struct {
	done chan struct{}
	err  error
}

func (p *Provider) destroy(ctx context.Context, id int64, instanceID string) error {
	if err := p.cfg.Client.DestroyInstance(ctx, id); err != nil {
		return fmt.Errorf("vast destroy %s: %w", instanceID, err)
	}
	p.forget(id)
	p.list.invalidate()
	p.log.Info("vast destroyed", "instance", instanceID)
	return nil
}

// List implements provider.Provider: every instance labelled with this
// cluster's prefix, over every page of the v1 listing.
func (p *Provider) List(ctx context.Context) ([]provider.Rental, error) {
	ins, err := p.list.refresh(ctx)
	if err != nil {
		p.note(err)
		return nil, fmt.Errorf("vast list: %w", err)
	}
	p.track(ins)
	yield := yielders(ins)
	var out []provider.Rental
	ours, listed, byID := map[int64]*provider.Rental{}, map[int64]bool{}, map[int64]Instance{}
	for _, in := range ins {
		if r, ok := p.rental(in); ok {
			r.Yield = yield[in.ID]
			out = append(out, r)
			listed[in.ID], byID[in.ID] = true, in
		}
	}
	var stopped []*provider.Rental // on demand, stopped by vast or a user (account.go)
	for i := range out {
		id, _ := strconv.ParseInt(out[i].InstanceID, 10, 64)
		ours[id] = &out[i]
		if in := byID[id]; out[i].EndNow == "" && !in.IsBid && stoppedOnPurpose(in) {
			stopped = append(stopped, &out[i])
		}
	}
	p.checkStops(ctx, stopped)
	p.dropTerms(listed)
	p.checkPrices(ctx, ours, byID)
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out, nil
}

// Close implements provider.Provider: the provider holds nothing open.
func (p *Provider) Close() error { return nil }
