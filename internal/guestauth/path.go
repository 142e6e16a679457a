package guestauth

import (
	"errors"
	"net/url"
	"strings"
)

// MaxPathLen bounds the request path the canonicaliser will look at.
const MaxPathLen = 2048

var errBadPath = errors.New("path not canonicalisable")

// Canonical turns an escaped request path (http.Request.URL.EscapedPath())
// into the one form the route table judges: percent-decoded exactly once, then
// split into segments with empty and "." segments dropped and ".." popping
// one. Decoding comes first, so %2F, %2e%2e and friends normalise like their
// plain spellings (the seed's "/%70rpc/Info" is "/prpc/Info"). Anything that
// cannot be made canonical — a bad escape, a control byte, a backslash, ".."
// above the root, an overlong path — is an error, which callers answer 401.
func Canonical(escaped string) (string, error) {
	if len(escaped) == 0 || len(escaped) > MaxPathLen || escaped[0] != '/' {
		return "", errBadPath
	}
	decoded, err := url.PathUnescape(escaped)
	if err != nil {
		return "", errBadPath
	}
	segs, err := segments(decoded)
	if err != nil {
		return "", err
	}
	return "/" + strings.Join(segs, "/"), nil
}

// segments normalises a decoded path into its segments.
func segments(p string) ([]string, error) {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return nil, errBadPath
		}
	}
	var out []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(out) == 0 {
				return nil, errBadPath // traversal above the root: fail closed
			}
			out = out[:len(out)-1]
		default:
			out = append(out, s)
		}
	}
	return out, nil
}
