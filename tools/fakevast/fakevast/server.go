// Package fakevast is a fake of the part of vast.ai's REST API that rayvast
// uses: offer search, create (accept an ask), show, list and destroy
// instances. Instances turn "running" after a delay, requests to one
// endpoint closer together than a minimum interval get 429 (vast's own rate
// limit shape), and a destroyed instance answers 404. A Backend makes each
// rental real: Docker runs a container with the env and command it was
// given and 64 identical ports (docker.go). README.md names the vast.ai
// document each behaviour comes from.
package fakevast

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Offer is one machine for rent. Unsafe is the fake's own knob (not vast's):
// the host keeps NET_RAW in its containers, so rayvast's checks refuse it.
type Offer struct {
	ID        int64   `json:"id"`
	MachineID int64   `json:"machine_id"`
	HostID    int64   `json:"host_id"`
	GPUName   string  `json:"gpu_name"`
	NumGPUs   int     `json:"num_gpus"`
	DPHTotal  float64 `json:"dph_total"`
	Verified  bool    `json:"verified"`
	Rentable  bool    `json:"rentable"`
	Rented    bool    `json:"rented"`
	External  bool    `json:"external"`
	// DirectPortCount is how many ports the machine maps: an instance gets
	// at most this many of the ports it asks for.
	DirectPortCount int `json:"direct_port_count"`
	// Quality fields the search filters on (search_offers reference);
	// New gives an offer that leaves them zero a good machine's values.
	Reliability2 float64 `json:"reliability2"`
	CUDAMaxGood  float64 `json:"cuda_max_good"`
	InetDown     float64 `json:"inet_down"`
	InetUp       float64 `json:"inet_up"`
	Datacenter   bool    `json:"datacenter"`
	Geolocation  string  `json:"geolocation"` // country code
	Unsafe       bool    `json:"fakevast_unsafe,omitempty"`
	// The fake's knobs for vast's create answers (README): the machine
	// starts instances stopped (200 success false with new_contract); the
	// host blacklisted this account (400 invalid_args); the offer is no
	// longer available (410 no_such_ask).
	StartsStopped bool `json:"fakevast_starts_stopped,omitempty"`
	Blacklisted   bool `json:"fakevast_blacklisted,omitempty"`
	Unavailable   bool `json:"fakevast_unavailable,omitempty"`
	// MinBid > 0: the machine takes interruptible bids of at least this
	// $/hour (bids.go); EndDate: when its contract ends (epoch seconds,
	// 0: none), copied to every instance rented on it (terms.go).
	MinBid  float64 `json:"min_bid,omitempty"`
	EndDate float64 `json:"end_date,omitempty"`
	// StorageCost is the machine's disk price in $/GB/month (vast.py's
	// offer field storage_cost, "$/GB/month"); 0 leaves all of dph_total
	// to the GPUs.
	StorageCost float64 `json:"storage_cost,omitempty"`
}

// goodMachine fills the quality fields an offer leaves zero.
func goodMachine(o Offer) Offer {
	if o.Reliability2 == 0 {
		o.Reliability2 = 0.995
	}
	if o.CUDAMaxGood == 0 {
		o.CUDAMaxGood = 12.8
	}
	if o.InetDown == 0 {
		o.InetDown = 800
	}
	if o.InetUp == 0 {
		o.InetUp = 400
	}
	if o.Geolocation == "" {
		o.Geolocation = "US"
	}
	return o
}

// DefaultOffers are n offers of machines without GPUs (the containers of
// this machine have none, and the fake does not lie about it), on distinct
// hosts and machines, cheapest first; each takes bids from its min_bid.
func DefaultOffers(n int) []Offer {
	out := make([]Offer, n)
	for i := range out {
		out[i] = Offer{ID: int64(5001 + i), MachineID: int64(2001 + i), HostID: int64(1001 + i), GPUName: "fake-cpu",
			NumGPUs: 0, DPHTotal: 0.10 + 0.01*float64(i), MinBid: 0.04 + 0.005*float64(i), Verified: true, Rentable: true, DirectPortCount: 100}
	}
	return out
}

// Launch is what a Backend needs to run one instance.
type Launch struct {
	ID    int64
	Image string
	// Entrypoint overrides the image's ENTRYPOINT ("" keeps it): in
	// runtype "args" vast takes it from onstart (the CLI sends
	// --entrypoint as onstart); the fake ignores a body's "entrypoint",
	// which the API reference does not have.
	Entrypoint string
	Args       []string
	Env        map[string]string // the rental's env with the "-p" port requests removed
	Ports      []int             // the 64 identical ports granted for 70000…70063
	GPUs       int
	Unsafe     bool
	APIKey     string // CONTAINER_API_KEY of this instance
}

// Backend runs the containers behind the API.
type Backend interface {
	// Start runs the instance and returns its public IP.
	Start(ctx context.Context, l Launch) (publicIP string, err error)
	// Stop ends it for good (destroy).
	Stop(ctx context.Context, id int64) error
	// Kill stops its process but keeps the instance (a host failure).
	Kill(ctx context.Context, id int64) error
}

// ImageInspector is a Backend that knows an image's EXPOSE ports: vast
// counts them against an instance's 64 open ports.
type ImageInspector interface {
	ExposedPorts(ctx context.Context, image string) (int, error)
}

// ExitWatcher is a Backend that knows whether an instance's process has
// exited (vast then shows actual_status "exited").
type ExitWatcher interface {
	Exited(id int64) bool
}

// Config builds a Server.
type Config struct {
	Key        string        // the API key every request must carry as Bearer
	Offers     []Offer       // default DefaultOffers(8)
	StartDelay time.Duration // create → running
	// Limits are vast's per-endpoint rate limits (nil: VastLimits()). A
	// request inside its endpoint's limit gets 429 with vast's text.
	Limits Limits
	// NoLimits turns rate limiting off; MinInterval > 0 replaces Limits
	// with one interval for every method and endpoint.
	NoLimits    bool
	MinInterval time.Duration
	// RefuseDestroys is how many destroys are answered 200
	// {"success": false} before one is done (a refused destroy).
	RefuseDestroys int
	// SearchQuota > 0 is the account's searches per UTC day; past it a
	// search gets 429 search_quota_exceeded with X-RateLimit-Reset.
	SearchQuota int
	// RetryAfter > 0 puts Retry-After (whole seconds) on every 429.
	RetryAfter time.Duration
	// BillingRefusal, when set, refuses every create 400 invalid_args
	// with this text (an account with a billing problem).
	BillingRefusal string
	// Deprecated lists "METHOD /path/" answered 410 deprecated_endpoint.
	Deprecated map[string]bool
	// Oversell lets a rented offer be created again: vast sells one
	// offer twice when two creates race.
	Oversell bool
	Backend  Backend // nil: instances run nowhere (API tests)
	// ContainerURL, when set, is given to every container as
	// RAYVAST_VAST_URL: where its agent reaches this fake to end its own
	// instance (vast's containers reach console.vast.ai, the agent's default).
	ContainerURL string
	// IgnoreCancelUnavail starts an instance that cannot start stopped
	// even when the create asked cancel_unavail (a vast that does not
	// honour it: the create reference still documents 200 success false).
	IgnoreCancelUnavail bool
	// ScopedKey makes the account's key one without billing_read (as
	// permissions.mdx recommends for an autoscaler): GET /api/v1/invoices/
	// is refused (instancekey.go).
	ScopedKey bool
	Now       func() time.Time
	Log       *slog.Logger
}

// Instance is the fake's record of one rental.
type Instance struct {
	ID        int64
	Offer     Offer
	Label     string
	Image     string
	Runtype   string
	Env       map[string]string
	Onstart   string
	Args      []string
	Created   time.Time
	Ports     []int
	PublicIP  string // once the backend started it
	StartErr  string
	Killed    bool
	Destroyed bool
	Stopped   bool    // created stopped (StartsStopped)
	Vanished  string  // actual_status after its host lost it (Vanish)
	Bid       float64 // the create's price: an interruptible rental (bids.go)
	Outbid    bool    // paused by a higher bid (Outbid)
	NoCredit  bool    // stopped when the account ran out of money (SetCredit)
	// OutbidStatus is the actual_status the pause left: "exited" when it
	// had run, else its starting status ("" null).
	OutbidStatus string
	DPH          float64 // its price: the offer's or the bid (terms.go: an accepted increase from NewFrom on)
	Disk         float64 // GB, the create's disk (disk_space)
	NewDPH       float64 // an accepted price increase's total $/hour, from NewFrom on (terms.go)
	NewFrom      time.Time
	APIKey       string // instance_api_key, the container's CONTAINER_API_KEY (instancekey.go)
	KeyRefused   int    // RefuseInstanceKey: the status its key gets (0: accepted)
	// DestroyedByOwnKey: the destroy came with the instance's own key.
	DestroyedByOwnKey bool
	DestroyedAt       time.Time
}

// Server is the fake API. Safe for concurrent use.
type Server struct {
	cfg Config

	mu        sync.Mutex
	offers    []Offer
	instances map[int64]*Instance
	nextID    int64
	last      map[string]time.Time // endpoint → last request (MinInterval)
	lim       *limiter
	calls     map[string]int
	limited   int
	refusals  int // destroys still to refuse
	times     map[string][]time.Time
	searches  map[string]int // UTC day → searches (SearchQuota)
	revoked   bool
	noCredit  bool // SetCredit: the account has no money (account.go)
	credit    float64
	increases []*increase // pending price increases (terms.go)
	nextInc   int64
	wg        sync.WaitGroup
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Offers == nil {
		cfg.Offers = DefaultOffers(8)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Limits == nil {
		cfg.Limits = VastLimits()
	}
	offers := make([]Offer, len(cfg.Offers))
	for i, o := range cfg.Offers {
		offers[i] = goodMachine(o)
	}
	return &Server{cfg: cfg, offers: offers, instances: map[int64]*Instance{}, nextID: 31000001,
		last: map[string]time.Time{}, calls: map[string]int{}, lim: newLimiter(cfg.Limits), refusals: cfg.RefuseDestroys,
		times: map[string][]time.Time{}, searches: map[string]int{}}
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v0/bundles/", s.search)
	mux.HandleFunc("POST /api/v0/bundles/", s.search)
	mux.HandleFunc("PUT /api/v0/search/asks/", s.search)
	mux.HandleFunc("PUT /api/v0/asks/{id}/", s.create)
	mux.HandleFunc("GET /api/v0/instances/", s.list)
	mux.HandleFunc("GET /api/v1/instances/", s.listV1)
	mux.HandleFunc("GET /api/v0/instances/{id}/", s.show)
	mux.HandleFunc("DELETE /api/v0/instances/{id}/", s.destroy)
	mux.HandleFunc("GET /api/v0/users/current", s.user)
	mux.HandleFunc("GET /api/v1/invoices/", s.invoices)
	mux.HandleFunc("GET /api/v0/users/current/", s.user)
	mux.HandleFunc("GET /api/v0/instances/pending-price-increases/", s.pendingIncreases)
	mux.HandleFunc("PUT /api/v0/instances/accept-price-increase/", s.answerIncrease(true))
	mux.HandleFunc("PUT /api/v0/instances/reject-price-increase/", s.answerIncrease(false))
	return s.guard(mux)
}

// guard checks the key (Bearer, or ?api_key= as the reference allows) and
// the per-endpoint rate limit.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			tok, ok = r.URL.Query().Get("api_key"), r.URL.Query().Has("api_key")
		}
		s.mu.Lock()
		revoked := s.revoked
		own := ok && s.instanceKeyAllows(tok, r)
		refused := 0
		if own {
			refused = s.refusedKey(r)
		}
		s.mu.Unlock()
		if refused != 0 {
			fail(w, refused, "unauthorized", "This API key is not authorized for this request")
			return
		}
		kind := accountKey
		if own {
			kind = instanceKey
		}
		r = withKeyKind(r, kind)
		if !own && (!ok || revoked || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Key)) != 1) {
			// vast answers a wrong or revoked key 404 with an auth_error
			// body, not 401 (README: peers' reports).
			fail(w, http.StatusNotFound, "auth_error", "Invalid or missing API key")
			return
		}
		if s.cfg.Deprecated[r.Method+" "+r.URL.Path] {
			fail(w, http.StatusGone, "deprecated_endpoint", "This endpoint is deprecated; see the API reference for its replacement")
			return
		}
		name := endpointName(r)
		s.mu.Lock()
		now := s.cfg.Now()
		s.calls[r.Method+" "+endpoint(r.URL.Path)]++
		s.times[name] = append(s.times[name], now)
		var limited bool
		switch {
		case s.cfg.NoLimits:
		case s.cfg.MinInterval > 0:
			ep := r.Method + " " + endpoint(r.URL.Path)
			prev, seen := s.last[ep]
			s.last[ep] = now
			limited = seen && now.Sub(prev) < s.cfg.MinInterval
		default:
			limited = !s.lim.allow(name, now)
		}
		if limited {
			s.limited++
		}
		quota, reset := false, time.Time{}
		if name == "search" && s.cfg.SearchQuota > 0 && !limited {
			day := now.UTC().Format(time.DateOnly)
			s.searches[day]++
			quota = s.searches[day] > s.cfg.SearchQuota
			y, m, d := now.UTC().Date()
			reset = time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
		}
		threshold := s.threshold(name)
		s.mu.Unlock()
		if quota {
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			fail(w, http.StatusTooManyRequests, "search_quota_exceeded", "Daily search quota exceeded; it resets at midnight UTC")
			return
		}
		if limited {
			if s.cfg.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((s.cfg.RetryAfter+time.Second-1)/time.Second)))
			}
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "API requests too frequent: endpoint threshold="+threshold)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// threshold is the endpoint's limit as vast's 429 text names it: the
// seconds between two requests. The caller holds s.mu.
func (s *Server) threshold(name string) string {
	l := s.cfg.Limits[name]
	iv := l.Interval
	if s.cfg.MinInterval > 0 {
		iv = s.cfg.MinInterval
	} else if l.Calls > 0 {
		iv = l.Per / time.Duration(l.Calls)
	}
	return strconv.FormatFloat(iv.Seconds(), 'f', -1, 64)
}

// user answers GET /api/v0/users/current, which the newest CLI asks before
// every command (it reads host_agreement_accepted to cache its role, and
// drops api_key from what it shows).
func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	credit := 100.0
	if s.noCredit {
		credit = s.credit
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": 4242, "username": "fakevast", "email": "fakevast@example.invalid",
		"balance": 0.0, "credit": credit, "host_agreement_accepted": false, "api_key": s.cfg.Key})
}

// endpoint replaces numeric path segments so /instances/1/ and /instances/2/
// share one limit, as they do at vast.
func endpoint(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"success": false, "error": code, "msg": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// search answers an offer search: the query is the JSON of ?q= (GET) or the
// body, either bare or as {"q": …}.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	var raw []byte
	if q := r.URL.Query().Get("q"); q != "" {
		raw = []byte(q)
	} else {
		raw, _ = io.ReadAll(io.LimitReader(r.Body, 1<<20))
	}
	q := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &q); err != nil {
			fail(w, http.StatusBadRequest, "invalid_args", "query is not a JSON object: "+err.Error())
			return
		}
		if inner, ok := q["q"]; ok {
			q = map[string]json.RawMessage{}
			if err := json.Unmarshal(inner, &q); err != nil {
				fail(w, http.StatusBadRequest, "invalid_args", "q is not a JSON object")
				return
			}
		}
	}
	s.mu.Lock()
	offers := append([]Offer(nil), s.offers...)
	s.mu.Unlock()
	out, err := filterOffers(offers, q)
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid_args", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"offers": out})
}

// create accepts an offer: PUT /api/v0/asks/{id}/.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	offerID, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid_args", "ask id must be a number")
		return
	}
	var req createBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "invalid_args", "body: "+err.Error())
		return
	}
	if msg := req.check(); msg != "" {
		fail(w, http.StatusBadRequest, "invalid_args", msg)
		return
	}
	if msg := s.billingRefusal(); msg != "" {
		fail(w, http.StatusBadRequest, "invalid_args", msg)
		return
	}
	exposed := 0
	if ii, ok := s.cfg.Backend.(ImageInspector); ok {
		exposed, _ = ii.ExposedPorts(r.Context(), req.Image)
	}
	s.mu.Lock()
	idx := -1
	for i, o := range s.offers {
		if o.ID == offerID {
			idx = i
		}
	}
	if idx < 0 || (s.offers[idx].Rented && !s.cfg.Oversell) || !s.offers[idx].Rentable {
		s.mu.Unlock()
		fail(w, http.StatusNotFound, "no_such_ask", fmt.Sprintf("No ask by id %d is available.", offerID))
		return
	}
	if o := s.offers[idx]; o.Blacklisted || o.Unavailable {
		s.mu.Unlock()
		if o.Blacklisted {
			fail(w, http.StatusBadRequest, "invalid_args", "This host has blacklisted your account.")
		} else {
			fail(w, http.StatusGone, "no_such_ask", fmt.Sprintf("Instance type %d is no longer available.", offerID))
		}
		return
	}
	stopped := s.offers[idx].StartsStopped || lowBid(req.Price, s.offers[idx])
	if stopped && req.cancels() && !s.cfg.IgnoreCancelUnavail {
		s.mu.Unlock()
		fail(w, http.StatusGone, "no_such_ask", fmt.Sprintf("Instance type %d is no longer available.", offerID))
		return
	}
	s.offers[idx].Rented = true
	id := s.nextID
	s.nextID++
	in := &Instance{ID: id, Offer: s.offers[idx], Label: req.Label, Image: req.Image, Runtype: req.Runtype,
		Env: req.Env, Onstart: req.Onstart, Args: req.Args, Created: s.cfg.Now(), Stopped: stopped,
		DPH: price(req.Price, s.offers[idx], req.Disk), Bid: bid(req.Price), Disk: req.Disk,
		Ports: grantPorts(id, askedPorts(req.Env), min(s.offers[idx].DirectPortCount, maxOpenPorts)-exposed)}
	s.instances[id] = in
	launch := Launch{ID: id, Image: req.Image, Entrypoint: req.entrypoint(), Args: req.Args, Env: map[string]string{},
		Ports: in.Ports, GPUs: in.Offer.NumGPUs, Unsafe: in.Offer.Unsafe, APIKey: randomHex(32)}
	in.APIKey = launch.APIKey
	if s.cfg.ContainerURL != "" {
		launch.Env[wire.EnvVastURL] = s.cfg.ContainerURL
	}
	for k, v := range req.Env {
		if !strings.HasPrefix(k, "-p ") {
			launch.Env[k] = v
		}
	}
	s.mu.Unlock()
	s.cfg.Log.Info("fakevast: instance created", "instance", id, "offer", offerID, "host", in.Offer.HostID, "label", req.Label)
	if in.Stopped {
		// The reference: success is false when the container started in
		// the stopped state; new_contract is still an instance.
		writeJSON(w, http.StatusOK, map[string]any{"success": false, "new_contract": id, "instance_api_key": launch.APIKey})
		return
	}
	if s.cfg.Backend != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ip, err := s.cfg.Backend.Start(context.Background(), launch)
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				in.StartErr = err.Error()
				s.cfg.Log.Error("fakevast: start failed", "instance", id, "err", err)
				return
			}
			in.PublicIP = ip
			if in.Destroyed { // destroyed while starting
				go s.cfg.Backend.Stop(context.Background(), id)
			}
		}()
	} else {
		in.PublicIP = "192.0.2." + strconv.FormatInt(id%250+1, 10)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "new_contract": id, "instance_api_key": launch.APIKey})
}

// grantPorts picks the identical ports vast grants for the asked 70000+
// requests, at most room of them: a stable pseudo-random run per instance
// in 20000–59999.
func grantPorts(id int64, asked, room int) []int {
	n := max(min(asked, room, wire.PortCount), 0)
	base := 20000 + int(id*193%600)*64
	ps := make([]int, n)
	for i := range ps {
		ps[i] = base + i
	}
	return ps
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (*Instance, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid_args", "instance id must be a number")
		return nil, false
	}
	in, ok := s.instances[id]
	if !ok || in.Destroyed {
		fail(w, http.StatusNotFound, "not_found", "Instance not found")
		return nil, false
	}
	return in, true
}

// show answers a gone instance 200 {"instances": null}, as vast does (the
// CLI's show instance reads that as "not found or no longer exists").
func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid_args", "invalid instance_id")
		return
	}
	in, ok := s.instances[id]
	if !ok || in.Destroyed {
		writeJSON(w, http.StatusOK, map[string]any{"instances": nil})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"instances": s.view(in)})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, 0, len(s.instances))
	for id, in := range s.instances {
		if !in.Destroyed {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	views := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		views = append(views, s.view(s.instances[id]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"instances_found": len(views), "instances": views})
}

func (s *Server) destroy(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	in, ok := s.lookup(w, r)
	if !ok {
		s.mu.Unlock()
		return
	}
	if s.refusals > 0 {
		s.refusals--
		s.mu.Unlock()
		s.cfg.Log.Info("fakevast: destroy refused", "instance", in.ID)
		writeJSON(w, http.StatusOK, map[string]any{"success": false, "msg": "Unable to destroy instance right now; try again."})
		return
	}
	in.Destroyed = true
	in.DestroyedByOwnKey, in.DestroyedAt = byInstanceKey(r), s.cfg.Now()
	for i := range s.offers {
		if s.offers[i].ID == in.Offer.ID {
			s.offers[i].Rented = false
		}
	}
	started := in.PublicIP != "" || in.StartErr != ""
	s.mu.Unlock()
	if s.cfg.Backend != nil && started {
		if err := s.cfg.Backend.Stop(r.Context(), in.ID); err != nil {
			s.cfg.Log.Error("fakevast: stop failed", "instance", in.ID, "err", err)
		}
	}
	s.cfg.Log.Info("fakevast: instance destroyed", "instance", in.ID, "by_own_key", byInstanceKey(r))
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// status is actual_status: null while "provisioning", loading until the
// delay passed and the backend started it, then running (or exited).
func (s *Server) status(in *Instance) any {
	age := s.cfg.Now().Sub(in.Created)
	switch {
	case in.Vanished != "":
		return in.Vanished
	case in.Outbid && in.OutbidStatus == "":
		return nil
	case in.Outbid:
		return in.OutbidStatus
	case in.Stopped || in.NoCredit || s.expired(in):
		return "stopped"
	case in.StartErr != "" || in.Killed:
		return "exited"
	case in.PublicIP != "" && s.exited(in.ID):
		return "exited" // its process ended
	case age < s.cfg.StartDelay/2:
		return nil
	case age < s.cfg.StartDelay || in.PublicIP == "":
		return "loading"
	}
	return "running"
}

// view is the instance as vast shows it (the fields of SOURCES: show
// instance), env as extra_env pairs.
func (s *Server) view(in *Instance) map[string]any {
	st := s.status(in)
	intended, cur, next := s.states(in)
	ip := ""
	ports := map[string]any{}
	if st == "running" {
		ip = in.PublicIP
		for _, p := range in.Ports {
			ports[strconv.Itoa(p)+"/tcp"] = []map[string]string{{"HostIp": "0.0.0.0", "HostPort": strconv.Itoa(p)}}
		}
	}
	keys := make([]string, 0, len(in.Env))
	for k := range in.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	extra := make([][2]string, 0, len(keys))
	for _, k := range keys {
		extra = append(extra, [2]string{k, in.Env[k]})
	}
	var label any
	if in.Label != "" {
		label = in.Label
	}
	msg := "success, running " + in.Image
	if in.StartErr != "" {
		msg = "Error: " + in.StartErr
	}
	return map[string]any{
		"id": in.ID, "actual_status": st, "intended_status": intended, "cur_state": cur, "next_state": next,
		"label": label, "image_uuid": in.Image, "image_runtype": in.Runtype, "image_args": in.Args,
		"extra_env": extra, "onstart": in.Onstart, "status_msg": msg,
		"public_ipaddr": ip, "ports": ports, "machine_id": in.Offer.MachineID, "host_id": in.Offer.HostID,
		"num_gpus": in.Offer.NumGPUs, "gpu_name": in.Offer.GPUName, "dph_total": s.dphNow(in), "disk_space": in.Disk, "storage_cost": in.Offer.StorageCost,
		"start_date": float64(in.Created.UnixNano()) / 1e9,
		"is_bid":     in.Bid > 0, "min_bid": in.Offer.MinBid, "end_date": endDate(in),
	}
}

// Kill makes an instance's host fail: its process stops (the node goes
// silent), the instance stays until destroyed.
func (s *Server) Kill(ctx context.Context, id int64) error {
	s.mu.Lock()
	in, ok := s.instances[id]
	if ok {
		in.Killed = true
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("fakevast kill %d: no such instance", id)
	}
	if s.cfg.Backend != nil {
		return s.cfg.Backend.Kill(ctx, id)
	}
	return nil
}

// Vanish makes an instance's host lose it as vast shows it: actual_status
// becomes status ("exited", "offline", "unknown" or "stopped") and its
// process stops; the instance stays (and bills) until destroyed.
func (s *Server) Vanish(ctx context.Context, id int64, status string) error {
	s.mu.Lock()
	in, ok := s.instances[id]
	if ok {
		in.Vanished = status
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("fakevast vanish %d: no such instance", id)
	}
	if s.cfg.Backend != nil {
		return s.cfg.Backend.Kill(ctx, id)
	}
	return nil
}

// RevokeKey makes vast refuse the account's key from now on (404
// auth_error), as when its owner revokes it.
func (s *Server) RevokeKey() {
	s.mu.Lock()
	s.revoked = true
	s.mu.Unlock()
}

// Live returns the instances not destroyed, by ID.
func (s *Server) Live() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Instance
	for _, in := range s.instances {
		if !in.Destroyed {
			c := *in
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Stats are request counts per endpoint and how many got 429.
func (s *Server) Stats() (calls map[string]int, limited int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		c[k] = v
	}
	return c, s.limited
}

// Wait waits for backend starts in flight.
func (s *Server) Wait() { s.wg.Wait() }

// AllInstances returns every instance ever created, destroyed ones too.
func (s *Server) AllInstances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, *in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
