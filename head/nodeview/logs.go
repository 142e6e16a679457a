package nodeview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rayvast/rayvast/head/guestclient"
	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// TokenTTL is the life of the tokens the head mints for itself here: long
// enough for one request on a slow link, short enough to be worth little if
// a node's host records it.
const TokenTTL = 2 * time.Minute

// ErrLogsOff means the node was started with public_logs off: its guest API
// does not mount /logs at all, whatever the token.
var ErrLogsOff = errors.New(`the node's logs are switched off (public_logs is off on it).
To read logs of new nodes, set "public_logs": true in the cluster config and
restart the head: candidates created from then on get RAYVAST_PUBLIC_LOGS=1.
Nodes already running keep the switch they were started with (it is measured at launch)`)

// Reader fetches nodes' logs and Info over their guest APIs with tokens
// minted by the app's internal issuer (docs/protocol.md §9), each holding one scope.
type Reader struct {
	Client     guestclient.Client
	AppID      string
	AppRootKey secret.Bytes
	Now        func() time.Time
}

// Log returns the tail of the node's log name ("agent" or "ray").
func (r Reader) Log(ctx context.Context, n wire.Node, name string) ([]byte, error) {
	st, body, err := r.get(ctx, n, "/logs/"+name, guestauth.ScopeLogs)
	if err != nil {
		return nil, err
	}
	switch st {
	case http.StatusOK:
		return body, nil
	case http.StatusUnauthorized, http.StatusNotFound:
		// With public_logs off the node mounts no /logs at all (404 behind
		// a valid token); Info, which every node answers to guest:info,
		// tells that apart from a log that does not exist (yet).
		info, err := r.Info(ctx, n)
		if err == nil && !info.PublicLogs {
			return nil, ErrLogsOff
		}
		if st == http.StatusUnauthorized {
			return nil, fmt.Errorf("node %s refused the head's guest:logs token (401)", n.InstanceID)
		}
		return nil, fmt.Errorf("node %s has no %q log (404; the ray log exists once Ray is supervised)", n.InstanceID, name)
	default:
		return nil, fmt.Errorf("node %s: /logs/%s answered %d", n.InstanceID, name, st)
	}
}

// Info asks the node's v1 Info.
func (r Reader) Info(ctx context.Context, n wire.Node) (wire.GuestInfo, error) {
	var info wire.GuestInfo
	st, body, err := r.get(ctx, n, "/prpc/v1/Info", guestauth.ScopeInfo)
	if err != nil {
		return info, err
	}
	if st != http.StatusOK {
		return info, fmt.Errorf("node %s: Info answered %d", n.InstanceID, st)
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return info, fmt.Errorf("node %s: Info: %w", n.InstanceID, err)
	}
	return info, nil
}

func (r Reader) get(ctx context.Context, n wire.Node, path string, scope guestauth.Scope) (int, []byte, error) {
	if n.PublicIP == "" || n.GuestAPIPort == 0 {
		return 0, nil, fmt.Errorf("node %s: no guest API address known", n.InstanceID)
	}
	tok, err := r.mint(scope)
	if err != nil {
		return 0, nil, err
	}
	return r.Client.Get(ctx, n.PublicIP, n.GuestAPIPort, path, tok.Reveal())
}

func (r Reader) mint(scope guestauth.Scope) (secret.String, error) {
	key, err := guestauth.DeriveEd25519(r.AppRootKey.Reveal(), guestauth.IssuerInfo)
	if err != nil {
		return secret.String{}, err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	tok, err := guestauth.Mint(key, guestauth.MintRequest{Iss: guestauth.InternalIssuer(r.AppID),
		Aud: []string{r.AppID}, Scopes: []string{string(scope)}, TTL: TokenTTL, Now: now()})
	if err != nil {
		return secret.String{}, err
	}
	return secret.New(tok), nil
}

// LastLines is the last n lines of b (all of it for n <= 0).
func LastLines(b []byte, n int) []byte {
	if n <= 0 {
		return b
	}
	b = bytes.TrimRight(b, "\n")
	i := len(b)
	for ; n > 0 && i > 0; n-- {
		j := bytes.LastIndexByte(b[:i], '\n')
		if j < 0 {
			i = 0
			break
		}
		i = j
	}
	if i > 0 {
		i++ // past the newline
	}
	out := append([]byte(nil), b[i:]...)
	if len(out) > 0 {
		out = append(out, '\n')
	}
	return out
}

// NewSince is what cur holds beyond prev, two tails of one growing log.
// While the log fits the served tail, cur starts with prev; once the tail
// window slides, the new part follows the last place prev's end appears in
// cur. A log that was replaced (prev's end is not in cur) is new in full.
func NewSince(prev, cur []byte) []byte {
	if bytes.HasPrefix(cur, prev) {
		return cur[len(prev):]
	}
	tail := prev
	if len(tail) > 4096 {
		tail = tail[len(tail)-4096:]
	}
	if i := bytes.LastIndex(cur, tail); i >= 0 {
		return cur[i+len(tail):]
	}
	return cur
}
