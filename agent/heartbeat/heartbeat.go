// Package heartbeat is the node's side of port B (docs/protocol.md §7): a heartbeat
// every interval with ±10% jitter over mutual TLS, and one-off reports.
// An unreachable head is logged and retried, never a reason to stop.
package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/internal/wire"
)

// Jitter spreads heartbeats so nodes started together don't beat in step.
const Jitter = 0.1

// The bounds of a heartbeat interval, whatever the head or config says: a
// head answering interval_s 0 or 10^10 must make the node neither spin
// nor fall silent for years.
const (
	MinInterval = time.Second
	MaxInterval = time.Hour
)

// SoonInterval is the heartbeat interval while the node waits to hear of
// a new Ray head (OnRayHead): Ray on the node is down until it does.
const SoonInterval = time.Second

// Config is one node's heartbeat loop.
type Config struct {
	Client      *http.Client // mutual TLS: the node cert, the pinned CA
	BaseURL     string       // https://HEAD:B
	InstanceID  string
	Interval    time.Duration              // until the head names another
	Status      func() wire.RayStatus      // what the supervisor knows of Ray
	HealthToken func(now time.Time) string // guest:health token; nil = ""
	OnStop      func()                     // the head said "stop" (called once)
	// OnRayHead, optional, hears the Ray head each answer names ("" none);
	// soon asks for the next heartbeat within SoonInterval.
	OnRayHead func(id string) (soon bool)
	// OnDrain, optional, hears on each answer whether the head drains
	// this node before a planned end (nil: it does not).
	OnDrain func(*wire.DrainNotice)
	// Mesh, optional, is the node's mesh: each heartbeat names the
	// membership version it holds, and a reply's new membership goes to it.
	Mesh Mesh
	// Kick, optional, asks for a heartbeat now: the loop beats at once and
	// closes the channel it received once that beat's answer (or failure)
	// is in (the mesh asks when a connect names an address it does not
	// know: a node may have joined since the last beat).
	Kick   <-chan chan struct{}
	OnBeat func(wire.Heartbeat, error) // optional: after each attempt (tests, metrics)
	// Final, when closed, makes Run send one last heartbeat at once (Ray's
	// final status, so the head sees the exit code) and return nil.
	Final <-chan struct{}
	Log   *slog.Logger
	Now   func() time.Time
	Sleep backoff.SleepFunc
	Rand  func() float64
}

// Mesh is what the heartbeat loop feeds (agent/mesh.Mesh).
type Mesh interface {
	Version() string
	Update(wire.MeshMembers)
}

// Run heartbeats until ctx ends (it returns ctx's error) or Final closes.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = backoff.Sleep
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	interval = clamp(interval)
	// wake ends a wait early when Final closes.
	wake, cancelWake := context.WithCancel(ctx)
	defer cancelWake()
	final := false
	if cfg.Final != nil {
		go func() {
			select {
			case <-cfg.Final:
				cancelWake()
			case <-wake.Done():
			}
		}()
	}
	l := &loop{cfg: cfg, interval: interval, retry: backoff.Policy{Base: time.Second, Jitter: Jitter, Rand: cfg.Rand}}
	var kicked []chan struct{} // waiting for this beat's answer
	for seq := int64(1); ; seq++ {
		hb := wire.Heartbeat{Version: wire.Version, InstanceID: cfg.InstanceID, Seq: seq, Ray: cfg.Status()}
		if cfg.HealthToken != nil {
			hb.HealthToken = cfg.HealthToken(cfg.Now())
		}
		if cfg.Mesh != nil {
			hb.MeshVersion = cfg.Mesh.Version()
		}
		reply, err := Send(ctx, cfg.Client, cfg.BaseURL, hb)
		if cfg.OnBeat != nil {
			cfg.OnBeat(hb, err)
		}
		if final {
			if err != nil {
				cfg.Log.Warn("last heartbeat failed", "seq", seq, "err", err)
			}
			return nil
		}
		wait := backoff.Jitter(l.interval, Jitter, cfg.Rand)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			wait = l.failed(seq, err)
		default:
			wait = l.answered(hb, reply, wait)
		}
		closeAll(kicked)
		kicked = nil
		k, err := sleepOrKick(wake, cfg, wait)
		if k != nil {
			kicked = append(kicked, k)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			final = true // Final closed: one more beat, at once
		}
	}
}

// sleepOrKick waits as cfg.Sleep does, ending early with the kick's
// channel when one comes.
func sleepOrKick(wake context.Context, cfg Config, wait time.Duration) (chan struct{}, error) {
	if cfg.Kick == nil {
		return nil, cfg.Sleep(wake, wait)
	}
	sctx, cancel := context.WithCancel(wake)
	defer cancel()
	got := make(chan chan struct{}, 1)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case k := <-cfg.Kick:
			got <- k
			cancel()
		case <-stop:
		}
	}()
	err := cfg.Sleep(sctx, wait)
	close(stop)
	<-done
	select {
	case k := <-got:
		return k, nil
	default:
		return nil, err
	}
}

func closeAll(chs []chan struct{}) {
	for _, c := range chs {
		close(c)
	}
}

// IntervalOf is a head's interval_s as a Duration within [MinInterval,
// MaxInterval]; ok is false for 0 or less (the head names none). Seconds
// are compared before multiplying: 10^10 s would overflow into a negative.
func IntervalOf(seconds int) (d time.Duration, ok bool) {
	if seconds <= 0 {
		return 0, false
	}
	if seconds > int(MaxInterval/time.Second) {
		return MaxInterval, true
	}
	return clamp(time.Duration(seconds) * time.Second), true
}

func clamp(d time.Duration) time.Duration {
	return min(max(d, MinInterval), MaxInterval)
}

// Send posts one heartbeat and decodes the reply (its unknown fields
// ignored: the head is trusted and a later one may add some).
func Send(ctx context.Context, hc *http.Client, baseURL string, hb wire.Heartbeat) (wire.HeartbeatReply, error) {
	var reply wire.HeartbeatReply
	resp, err := post(ctx, hc, baseURL+"/heartbeat", hb)
	if err != nil {
		return reply, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return reply, statusError("heartbeat", resp)
	}
	// Fields a later head added are skipped (protocol history 29).
	if err := wire.DecodeTolerant(resp.Body, wire.MaxBody, &reply); err != nil {
		return reply, fmt.Errorf("heartbeat reply: %w", err)
	}
	return reply, nil
}

// Report posts one event (answered 204). Network errors, 5xx and 429 come
// back as *backoff.TransientError so callers can backoff.Retry them.
func Report(ctx context.Context, hc *http.Client, baseURL string, r wire.Report) error {
	resp, err := post(ctx, hc, baseURL+"/report", r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return statusError("report", resp)
	}
	return nil
}

func post(ctx context.Context, hc *http.Client, url string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, backoff.Transient("post "+url, err)
	}
	return resp, nil
}

func statusError(op string, resp *http.Response) error {
	var body wire.ErrorBody
	_ = wire.Decode(io.LimitReader(resp.Body, wire.MaxBody), wire.MaxBody, &body)
	err := &StatusError{Op: op, Code: resp.StatusCode, Word: body.Error,
		Unknown: resp.Header.Get(wire.NodeStatusHeader) == wire.NodeUnknown}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return backoff.Transient(op, err)
	}
	return err
}
