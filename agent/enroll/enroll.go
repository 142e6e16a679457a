package enroll

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/internal/wire"
)

// maxBundle bounds the enroll answer: certificates, keys and a shim file.
const maxBundle = 4 << 20

// Refusal is a final "no" from the head (403, or any 4xx but 429): the
// agent must not retry it.
type Refusal struct {
	Status int
	Body   wire.ErrorBody // {"error":"refused"} or {"error":"rejected","reason":…}
}

func (r *Refusal) Error() string {
	if r.Body.Reason != "" {
		return fmt.Sprintf("enroll: %d %s (%s)", r.Status, r.Body.Error, r.Body.Reason)
	}
	if r.Body.Error != "" {
		return fmt.Sprintf("enroll: %d %s", r.Status, r.Body.Error)
	}
	return fmt.Sprintf("enroll: status %d", r.Status)
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// Enroll POSTs req to url once. A 200 is decoded strictly into the bundle;
// 5xx/429, network errors, timeouts and a 200 that does not decode are
// *backoff.TransientError (the caller retries the same request: same token,
// same port_key); other statuses *Refusal.
func Enroll(ctx context.Context, hc *http.Client, url string, req wire.EnrollRequest) (wire.EnrollResponse, error) {
	var out wire.EnrollResponse
	body, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("enroll: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return out, fmt.Errorf("enroll: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		return out, backoff.Transient("enroll", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := wire.Decode(resp.Body, maxBundle, &out); err != nil {
			// Most likely the answer was cut (the head stopped while
			// writing it): the head answers the same request again with a
			// fresh certificate (docs/protocol.md §6 step 2 Retries).
			return out, backoff.Transient("enroll", fmt.Errorf("decode bundle: %w", err))
		}
		if out.Version != wire.Version {
			return out, fmt.Errorf("enroll: bundle version %d not supported", out.Version)
		}
		return out, nil
	case retryable(resp.StatusCode):
		io.Copy(io.Discard, io.LimitReader(resp.Body, wire.MaxBody))
		return out, backoff.Transient("enroll", fmt.Errorf("status %d", resp.StatusCode))
	default:
		r := &Refusal{Status: resp.StatusCode}
		_ = wire.Decode(resp.Body, wire.MaxBody, &r.Body) // best effort: a proxy's HTML is still a refusal
		return out, r
	}
}
