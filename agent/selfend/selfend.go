// Package selfend is a node ending its own rental when its head is gone
// (docs/protocol.md §9): Watch decides when, from each heartbeat's outcome, and an
// Ender does it. On vast the Ender destroys this instance with its own
// key, CONTAINER_API_KEY; elsewhere (the docker provider) the agent ends
// Ray and exits, and the container, whose only process the agent is,
// stops: a stopped container holds no CPU, memory or GPU of its host,
// which is what a destroyed vast instance stops billing.
package selfend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/agent/heartbeat"
	"github.com/rayvast/rayvast/internal/secret"
)

// Why a node ends itself.
const (
	WhyUnheard     = "unheard"      // no heartbeat answered for the limit
	WhyUnknownNode = "unknown_node" // the head answered that it does not know this node
)

// Watch tells from heartbeat outcomes when a node must end itself.
type Watch struct {
	limit time.Duration // 0: never
	now   func() time.Time
	mu    sync.Mutex
	last  time.Time // the last answered heartbeat, or the start
}

// NewWatch starts the clock at now: a node that never hears its head ends
// itself limit after enrollment. limit 0 means never, for either reason.
func NewWatch(limit time.Duration, now func() time.Time) *Watch {
	if now == nil {
		now = time.Now
	}
	return &Watch{limit: max(limit, 0), now: now, last: now()}
}

// Beat records one heartbeat attempt (err nil: answered) and says whether
// the node must end itself now, and why. Any answer but unknown_node, a
// 403 of another cause or a 5xx included, is not the head's word that the
// node is gone: only the limit ends it then.
func (w *Watch) Beat(err error) (end bool, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	switch {
	case w.limit == 0:
		return false, ""
	case err == nil:
		w.last = now
		return false, ""
	case heartbeat.UnknownNode(err):
		return true, WhyUnknownNode
	case now.Sub(w.last) >= w.limit:
		return true, WhyUnheard
	}
	return false, ""
}

// Unheard is how long since the last answer.
func (w *Watch) Unheard() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now().Sub(w.last)
}

// Ender ends this node's rental.
type Ender interface {
	End(ctx context.Context) error
	String() string // what it does, for the log
}

// DefaultVastURL is vast's API (api-reference/openapi/yaml/destroy_instance.yaml, servers).
const DefaultVastURL = "https://console.vast.ai"

// Vast destroys one vast instance with that instance's own key: DELETE
// /api/v0/instances/{id}/ with the key as Bearer (destroy_instance.yaml;
// the key, the create answer's instance_api_key given to the container as
// CONTAINER_API_KEY, "can only start, stop, or destroy that specific
// instance": api-reference/hello-world.mdx).
type Vast struct {
	BaseURL    string // "" = DefaultVastURL
	InstanceID string // vast's id, CONTAINER_ID
	Key        secret.String
	Client     *http.Client // nil = one with CallTimeout
}

// CallTimeout bounds one destroy call, so a vast that hangs is retried.
const CallTimeout = 30 * time.Second

func (v Vast) String() string { return "vast destroy of instance " + v.InstanceID }

// ErrAlreadyGone: vast answered the destroy 404 not_found or
// no_such_instance: the instance is already destroyed (by the head, or an
// earlier try), which is what ending it wanted.
var ErrAlreadyGone = errors.New("the instance is already destroyed")

// ErrKeyRefused: vast refused CONTAINER_API_KEY (401, 403, or 404 with
// an auth_error body, vast's answer to a wrong or revoked key): no retry
// can end the instance; the head ends it when it is back.
var ErrKeyRefused = errors.New("vast refused this instance's CONTAINER_API_KEY")

// End asks vast once. A 404 not_found/no_such_instance is ErrAlreadyGone
// and a 401, 403 or 404 auth_error ErrKeyRefused, neither retried (a key
// vast refused does not become good: retrying it only kept the node up,
// billing, for the retry's ten minutes); every other failure is transient
// (backoff.Retry retries it): a refused destroy (200 success false), 429,
// 5xx, a 404 of another word, the network.
func (v Vast) End(ctx context.Context) error {
	base := v.BaseURL
	if base == "" {
		base = DefaultVastURL
	}
	u := strings.TrimRight(base, "/") + "/api/v0/instances/" + url.PathEscape(v.InstanceID) + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return fmt.Errorf("vast destroy: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+v.Key.Reveal())
	hc := v.Client
	if hc == nil {
		hc = &http.Client{Timeout: CallTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return backoff.Transient("vast destroy", scrub(err, v.Key))
	}
	defer resp.Body.Close()
	var body struct {
		Success *bool  `json:"success"`
		Msg     string `json:"msg"`
		Error   string `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(raw, &body)
	switch {
	case resp.StatusCode == http.StatusOK && (body.Success == nil || *body.Success):
		return nil
	case resp.StatusCode == http.StatusNotFound && (body.Error == "not_found" || body.Error == "no_such_instance"):
		return fmt.Errorf("vast destroy: %w (404 %s)", ErrAlreadyGone, body.Error)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden ||
		resp.StatusCode == http.StatusNotFound && body.Error == "auth_error":
		return fmt.Errorf("vast destroy: %w (status %d %s %s)", ErrKeyRefused, resp.StatusCode, body.Error, body.Msg)
	}
	return backoff.Transient("vast destroy", fmt.Errorf("status %d %s %s", resp.StatusCode, body.Error, body.Msg))
}

// scrub keeps the key out of an error that might quote a URL.
func scrub(err error, key secret.String) error {
	if key.IsZero() || !strings.Contains(err.Error(), key.Reveal()) {
		return err
	}
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), key.Reveal(), "[redacted]"))
}

// Exit is the docker provider's equivalent: nothing to call; the agent
// ends Ray and exits, and its container stops.
type Exit struct{}

func (Exit) String() string            { return "agent exit (the container stops)" }
func (Exit) End(context.Context) error { return nil }

// Run ends the rental with e, retried with backoff until it succeeds or
// retry's MaxElapsed passes, and logs the result. The caller then ends
// Ray and exits.
func Run(ctx context.Context, e Ender, why string, unheard time.Duration, retry backoff.RetryConfig, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry.Log = log
	log.Warn("ending own rental: head gone", "why", why, "unheard", unheard.Round(time.Second), "how", e.String())
	_, err := backoff.Retry(ctx, retry, "end own rental", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, e.End(ctx)
	})
	switch {
	case errors.Is(err, ErrAlreadyGone):
		log.Info("own rental ended: already destroyed", "how", e.String())
		return nil
	case errors.Is(err, ErrKeyRefused):
		log.Error("ending own rental failed: vast refused this instance's CONTAINER_API_KEY, so the rental keeps billing; "+
			"the head ends it when it is back (a lost node's rental is destroyed), or destroy the instance in vast's console", "how", e.String(), "err", err)
		return err
	case err != nil:
		log.Error("ending own rental failed", "how", e.String(), "err", err)
		return err
	}
	log.Info("own rental ended", "how", e.String())
	return nil
}
