package vast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Offer is one search result (the fields rayvast uses).
type Offer struct {
	ID              int64   `json:"id"`
	MachineID       int64   `json:"machine_id"`
	HostID          int64   `json:"host_id"`
	GPUName         string  `json:"gpu_name"`
	NumGPUs         int     `json:"num_gpus"`
	DPHTotal        float64 `json:"dph_total"`
	DirectPortCount int     `json:"direct_port_count"`
	Rentable        bool    `json:"rentable"`
	Verified        bool    `json:"verified"`
	Reliability2    float64 `json:"reliability2"`
	CUDAMaxGood     float64 `json:"cuda_max_good"`
	InetDown        float64 `json:"inet_down"`
	InetUp          float64 `json:"inet_up"`
	// MinBid is the lowest bid ($/hour) an interruptible rental of the
	// offer may make now (search_offers.yaml); EndDate is when the offer's
	// contract ends (epoch seconds, 0 unknown).
	MinBid  float64 `json:"min_bid"`
	EndDate float64 `json:"end_date"`
	// StorageCost is the disk price in $/GB per month (search_offers.yaml):
	// billed for every second an instance exists, a bid's on top of it.
	StorageCost float64 `json:"storage_cost"`
}

// StorageDPH is what diskGB cost per hour at storageCost $/GB per 30-day
// month (vast-cli's price-increase table's month; show_instance.yaml's
// example: storage_cost 0.1493 on 10 GB is storage_total_cost 0.00207/h).
func StorageDPH(storageCost, diskGB float64) float64 { return storageCost * diskGB / (24 * 30) }

// Query is an offer search. Zero fields are left out.
type Query struct {
	GPUName        string
	NumGPUs        int
	MaxDPH         float64 // $/hour, 0 = any
	MinPorts       int     // direct_port_count at least this
	DiskGB         float64 // allocated_storage: the price includes this disk
	ExcludeHosts   []int64
	ExcludeMachine []int64
	Limit          int
	Filters        Filters
	// Bid searches interruptible offers (type "bid"): MaxDPH then caps
	// min_bid, not dph_total (a bid search answers it at the minimum bid).
	Bid bool
}

// Filters are the offer filters of one search, defaults applied
// (Provider.filters): numbers are minimums, zero leaves a filter out.
type Filters struct {
	Reliability2 float64
	Verified     bool // false: verified or not
	CUDAMaxGood  float64
	InetDown     float64
	InetUp       float64
	Datacenter   bool // true: vast's secure cloud only
	Geolocation  []string
	Search       map[string]map[string]any // passed through as given
}

// key is the filters as one comparable string (the offer cache's key).
func (f Filters) key() string {
	b, _ := json.Marshal(f)
	return string(b)
}

// GPUName normalises a GPU name as the CLI does: vast spells it with
// spaces ("RTX 4090"); the CLI turns "_" into " " (SOURCES.md).
func GPUName(s string) string { return strings.TrimSpace(strings.ReplaceAll(s, "_", " ")) }

// num is a filter value as the CLI sends it: a string ("0.12").
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func ids(v []int64) []string {
	out := make([]string, len(v))
	for i, id := range v {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

// Body is the JSON the CLI's `search offers` posts: its default filters
// (verified, external, rentable, rented), the query's filters with
// string values, order, type, limit and allocated_storage.
func (q Query) Body() map[string]any {
	f := map[string]any{
		"external": map[string]any{"eq": false},
		"rentable": map[string]any{"eq": true},
		"rented":   map[string]any{"eq": false},
		"num_gpus": map[string]any{"eq": strconv.Itoa(q.NumGPUs)},
		"order":    [][]string{{"dph_total", "asc"}},
		"type":     "on-demand",
	}
	price := "dph_total"
	if q.Bid {
		f["type"], price = "bid", "min_bid"
		f["order"] = [][]string{{"min_bid", "asc"}} // the lowest bid first
	}
	if g := GPUName(q.GPUName); g != "" {
		f["gpu_name"] = map[string]any{"eq": g}
	}
	if q.MaxDPH > 0 {
		f[price] = map[string]any{"lte": num(q.MaxDPH)}
	}
	if q.MinPorts > 0 {
		f["direct_port_count"] = map[string]any{"gte": strconv.Itoa(q.MinPorts)}
	}
	if len(q.ExcludeHosts) > 0 {
		f["host_id"] = map[string]any{"notin": ids(q.ExcludeHosts)}
	}
	if len(q.ExcludeMachine) > 0 {
		f["machine_id"] = map[string]any{"notin": ids(q.ExcludeMachine)}
	}
	if q.Limit > 0 {
		f["limit"] = q.Limit
	}
	if q.DiskGB > 0 {
		f["allocated_storage"] = q.DiskGB
	}
	// The filters after rayvast's own: a passthrough field never replaces
	// one of those (the config refuses them; this keeps it so).
	for k, ops := range q.Filters.Search {
		if _, set := f[k]; !set {
			f[k] = ops
		}
	}
	fl := q.Filters
	if fl.Verified {
		f["verified"] = map[string]any{"eq": true}
	}
	for k, v := range map[string]float64{"reliability2": fl.Reliability2, "cuda_max_good": fl.CUDAMaxGood, "inet_down": fl.InetDown, "inet_up": fl.InetUp} {
		if v > 0 {
			f[k] = map[string]any{"gte": num(v)}
		}
	}
	if fl.Datacenter {
		f["datacenter"] = map[string]any{"eq": true}
	}
	if len(fl.Geolocation) > 0 {
		f["geolocation"] = map[string]any{"in": fl.Geolocation}
	}
	return f
}

// SearchOffers posts the query to /api/v0/bundles/ (the CLI's search). The
// answer is filtered again here (vast may ignore a filter it does not
// know): a wrong GPU, count, price, too few ports, or an excluded host or
// machine never comes back.
func (c *Client) SearchOffers(ctx context.Context, q Query) ([]Offer, error) {
	var ans struct {
		Offers []Offer `json:"offers"`
	}
	if err := c.do(ctx, call{op: "search offers", ep: EpSearch, method: http.MethodPost, path: "/api/v0/bundles/",
		body: q.Body(), out: &ans, pol: idempotent}); err != nil {
		return nil, err
	}
	hosts, machines := set(q.ExcludeHosts), set(q.ExcludeMachine)
	gpu := GPUName(q.GPUName)
	out := ans.Offers[:0]
	for _, o := range ans.Offers {
		switch {
		case gpu != "" && o.GPUName != gpu,
			o.NumGPUs != q.NumGPUs,
			q.MaxDPH > 0 && !q.Bid && o.DPHTotal > q.MaxDPH,
			q.MaxDPH > 0 && q.Bid && o.MinBid > q.MaxDPH, q.Bid && o.MinBid <= 0,
			o.DirectPortCount < q.MinPorts,
			hosts[o.HostID], machines[o.MachineID],
			!q.Filters.admits(o):
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// admits checks an offer against the filters whose fields the offer
// carries as numbers (the others are vast's to apply).
func (f Filters) admits(o Offer) bool {
	return (!f.Verified || o.Verified) && o.Reliability2 >= f.Reliability2 && o.CUDAMaxGood >= f.CUDAMaxGood &&
		o.InetDown >= f.InetDown && o.InetUp >= f.InetUp
}

func set(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// CreateRequest is the body of PUT /api/v0/asks/{offer}/, the fields the
// CLI's `create instance` sends that rayvast uses. In runtype "args" vast
// keeps the image's ENTRYPOINT unless onstart overrides it (the CLI's
// --entrypoint travels as onstart); args go to that entrypoint.
type CreateRequest struct {
	ClientID      string            `json:"client_id"`
	Image         string            `json:"image"`
	Env           map[string]string `json:"env"`
	Disk          float64           `json:"disk"`
	Label         string            `json:"label"`
	Onstart       string            `json:"onstart"`
	Runtype       string            `json:"runtype"`
	Args          []string          `json:"args,omitempty"`
	TargetState   string            `json:"target_state,omitempty"`
	CancelUnavail bool              `json:"cancel_unavail"`
	// Price is the bid of an interruptible rental ($/hour; the CLI's
	// --bid_price); nil rents on demand.
	Price *float64 `json:"price,omitempty"`
}

// Field limits of create (SOURCES.md: create_instance x-input-validation).
const (
	MaxImageLen   = 1024
	MaxLabelLen   = 256
	MaxCommandLen = 4096 // args + args_str + onstart
	MaxEnvValue   = 256
	MaxEnvTotal   = 32768
	MinDiskGB     = 8
)

// CommandLen is what vast counts against MaxCommandLen: the args joined by
// spaces plus onstart.
func CommandLen(args []string, onstart string) int {
	n := len(onstart)
	for i, a := range args {
		n += len(a)
		if i > 0 {
			n++
		}
	}
	return n
}

// Check refuses a request vast would refuse, before it costs a slot.
func (r CreateRequest) Check() error {
	switch {
	case r.Image == "" || len(r.Image) > MaxImageLen:
		return fmt.Errorf("image: want 1-%d characters, have %d", MaxImageLen, len(r.Image))
	case len(r.Label) > MaxLabelLen:
		return fmt.Errorf("label: %d characters, at most %d", len(r.Label), MaxLabelLen)
	case CommandLen(r.Args, r.Onstart) > MaxCommandLen:
		return fmt.Errorf("args and onstart: %d characters, at most %d", CommandLen(r.Args, r.Onstart), MaxCommandLen)
	case r.Disk < MinDiskGB:
		return fmt.Errorf("disk: %g GB, at least %d", r.Disk, MinDiskGB)
	}
	total := 0
	for k, v := range r.Env {
		if len(v) > MaxEnvValue {
			return fmt.Errorf("env %s: value of %d characters, at most %d", k, len(v), MaxEnvValue)
		}
		total += len(k) + len(v)
	}
	if total > MaxEnvTotal {
		return fmt.Errorf("env: %d characters in all, at most %d", total, MaxEnvTotal)
	}
	return nil
}

// CreateInstance accepts an offer; it returns the new instance ID.
func (c *Client) CreateInstance(ctx context.Context, offerID int64, req CreateRequest) (int64, error) {
	op := "create instance"
	if err := req.Check(); err != nil {
		return 0, fmt.Errorf("vast %s: %w", op, err)
	}
	var ans struct {
		Success     bool   `json:"success"`
		NewContract int64  `json:"new_contract"`
		Msg         string `json:"msg"`
	}
	if err := c.do(ctx, call{op: op, ep: EpCreate, method: http.MethodPut, path: "/api/v0/asks/" + strconv.FormatInt(offerID, 10) + "/",
		body: req, out: &ans, pol: notIdempotent}); err != nil {
		return 0, err
	}
	switch {
	case !ans.Success && ans.NewContract > 0:
		// The reference: success is false when the container started in
		// the stopped state; the contract is still an instance (it bills
		// its storage) and the caller must destroy it.
		return ans.NewContract, fmt.Errorf("vast %s: offer %d: instance %d: %w", op, offerID, ans.NewContract, ErrStopped)
	case !ans.Success || ans.NewContract <= 0:
		return 0, fmt.Errorf("vast %s: offer %d: answer without success/new_contract: %s", op, offerID, cut(ans.Msg, 200))
	}
	return ans.NewContract, nil
}

// ErrStopped is a create whose instance vast started stopped (success
// false with a new_contract): CreateInstance returns its ID with it.
var ErrStopped = errors.New("vast started the instance stopped")

// Instance is what rayvast reads of one instance.
type Instance struct {
	ID           int64   `json:"id"`
	ActualStatus *string `json:"actual_status"`
	Label        *string `json:"label"`
	PublicIPAddr string  `json:"public_ipaddr"`
	MachineID    int64   `json:"machine_id"`
	HostID       int64   `json:"host_id"`
	NumGPUs      int     `json:"num_gpus"`
	DPHTotal     float64 `json:"dph_total"`
	DiskSpace    float64 `json:"disk_space"`   // GB allocated (show_instance.yaml)
	StorageCost  float64 `json:"storage_cost"` // $/GB/month
	// IsBid: an interruptible rental; MinBid its machine's min bid now;
	// EndDate its contract's end (epoch seconds, 0 unknown); CurState and
	// NextState the machine contract's current and next scheduled state,
	// IntendedStatus the container's intended status (show_instance.yaml).
	IsBid          bool    `json:"is_bid"`
	MinBid         float64 `json:"min_bid"`
	EndDate        float64 `json:"end_date"`
	CurState       string  `json:"cur_state"`
	NextState      string  `json:"next_state"`
	IntendedStatus string  `json:"intended_status"`
}

// Paused: vast stopped the instance and means it to stay stopped:
// cur_state, intended_status and next_state all "stopped", whatever
// actual_status shows (null or loading while it started, exited once it
// ran). dstack reads this as an interruption (an outbid bid), even
// during provisioning (SOURCES.md).
func (i Instance) Paused() bool {
	return i.CurState == "stopped" && i.IntendedStatus == "stopped" && i.NextState == "stopped"
}

// Status is actual_status ("" while vast provisions it).
func (i Instance) Status() string {
	if i.ActualStatus == nil {
		return ""
	}
	return *i.ActualStatus
}

// LabelText is the label ("" when null).
func (i Instance) LabelText() string {
	if i.Label == nil {
		return ""
	}
	return *i.Label
}

// ShowInstance asks GET /api/v0/instances/{id}/?owner=me (the CLI's show
// instance); ErrNotFound when vast answers {"instances": null} or a 404
// whose body says not found.
func (c *Client) ShowInstance(ctx context.Context, id int64) (Instance, error) {
	var ans struct {
		Instances *Instance `json:"instances"`
	}
	if err := c.do(ctx, call{op: "show instance", ep: EpShow, method: http.MethodGet, path: "/api/v0/instances/" + strconv.FormatInt(id, 10) + "/",
		query: "owner=me", out: &ans, pol: idempotent}); err != nil {
		return Instance{}, err
	}
	if ans.Instances == nil || ans.Instances.ID == 0 {
		return Instance{}, fmt.Errorf("vast show instance %d: %w", id, ErrNotFound)
	}
	return *ans.Instances, nil
}

// ListPageSize is the v1 listing's page (its maximum).
const ListPageSize = 25

// maxPages bounds one listing (25 000 instances) so a server handing out
// tokens forever cannot hold the head.
const maxPages = 1000

// listQuery is the CLI's v1 listing query, in its order: select_filters,
// order_by, limit, after_token; JSON values quote_plus'd.
func listQuery(after string) string {
	q := "select_filters=" + url.QueryEscape("{}") +
		"&order_by=" + url.QueryEscape(`[{"col": "id", "dir": "asc"}]`) +
		"&limit=" + strconv.Itoa(ListPageSize)
	if after != "" {
		q += "&after_token=" + url.QueryEscape(after)
	}
	return q
}

// ListInstances reads every page of GET /api/v1/instances/ (keyset
// pagination: next_token until null), as the CLI's show instances does.
func (c *Client) ListInstances(ctx context.Context) ([]Instance, error) {
	var all []Instance
	seen := map[string]bool{}
	after := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("vast list instances: more than %d pages", maxPages)
		}
		var ans struct {
			Instances []Instance `json:"instances"`
			NextToken *string    `json:"next_token"`
		}
		if err := c.do(ctx, call{op: "list instances", ep: EpList, method: http.MethodGet, path: "/api/v1/instances/",
			query: listQuery(after), out: &ans, pol: idempotent}); err != nil {
			return nil, err
		}
		all = append(all, ans.Instances...)
		if ans.NextToken == nil || *ans.NextToken == "" {
			return all, nil
		}
		if seen[*ans.NextToken] {
			return nil, errors.New("vast list instances: next_token repeats")
		}
		seen[*ans.NextToken] = true
		after = *ans.NextToken
	}
}

// ErrRefused is a destroy vast answered with success false.
var ErrRefused = errors.New("vast: destroy refused")

// destroyTries bounds the destroys of one call that vast refuses with
// success false (each waits for its slot, 3 s apart at vast's limit).
const destroyTries = 3

// DestroyInstance asks DELETE /api/v0/instances/{id}/ with the CLI's empty
// JSON body. An instance already gone (a not-found 404) is not an error; an
// answer with success false is, after destroyTries tries.
func (c *Client) DestroyInstance(ctx context.Context, id int64) error {
	var last string
	for try := 0; try < destroyTries; try++ {
		var ans struct {
			Success *bool  `json:"success"`
			Msg     string `json:"msg"`
			Error   string `json:"error"`
		}
		err := c.do(ctx, call{op: "destroy instance", ep: EpDestroy, method: http.MethodDelete, path: "/api/v0/instances/" + strconv.FormatInt(id, 10) + "/",
			body: struct{}{}, out: &ans, pol: idempotent})
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if ans.Success == nil || *ans.Success {
			return nil
		}
		last = errorText([]byte(fmt.Sprintf(`{"error":%q,"msg":%q}`, ans.Error, ans.Msg)))
		c.cfg.Log.Warn("vast refused a destroy, trying again", "instance", id, "try", try+1, "msg", last)
	}
	return fmt.Errorf("vast destroy instance %d: %w: %s", id, ErrRefused, last)
}
