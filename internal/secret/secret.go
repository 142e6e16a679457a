// Package secret holds values that must never reach a log, a JSON document
// meant for people, or a %v. Every way of printing one prints Redacted; the
// value comes out only through Reveal, so each place that needs it is greppable.
package secret

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
)

// Redacted is what every printing path shows instead of a secret.
const Redacted = "[redacted]"

// String is a secret text value: a token, a PEM key, a base64 key.
type String struct{ v string }

// New wraps s.
func New(s string) String { return String{v: s} }

// Reveal returns the secret itself. Call it only where the value goes on the
// wire or into a 0600 file.
func (s String) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s String) IsZero() bool { return s.v == "" }

// Equal compares in constant time for equal lengths; unequal lengths are
// unequal without looking at the contents (the length of a join token is public).
func (s String) Equal(o String) bool {
	return len(s.v) == len(o.v) && subtle.ConstantTimeCompare([]byte(s.v), []byte(o.v)) == 1
}

func (String) String() string                { return Redacted }
func (String) GoString() string              { return Redacted }
func (String) LogValue() slog.Value          { return slog.StringValue(Redacted) }
func (String) MarshalJSON() ([]byte, error)  { return []byte(`"` + Redacted + `"`), nil }
func (String) MarshalText() ([]byte, error)  { return []byte(Redacted), nil }
func (String) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(Redacted)) }

// Bytes is a secret binary value: a raw key or seed.
type Bytes struct{ v []byte }

// NewBytes wraps b (not copied: the caller hands ownership over).
func NewBytes(b []byte) Bytes { return Bytes{v: b} }

// Reveal returns the secret bytes themselves.
func (b Bytes) Reveal() []byte { return b.v }

// Len is the secret's length, which is not secret.
func (b Bytes) Len() int { return len(b.v) }

func (Bytes) String() string                { return Redacted }
func (Bytes) GoString() string              { return Redacted }
func (Bytes) LogValue() slog.Value          { return slog.StringValue(Redacted) }
func (Bytes) MarshalJSON() ([]byte, error)  { return []byte(`"` + Redacted + `"`), nil }
func (Bytes) MarshalText() ([]byte, error)  { return []byte(Redacted), nil }
func (Bytes) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(Redacted)) }
