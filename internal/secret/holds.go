package secret

import (
	"encoding/base64"
	"strings"
)

// MinContained is the shortest secret looked for inside a longer value:
// a shorter one would match innocent values by chance. Every rayvast
// secret is 32 random bytes or more; vast's API keys are 64 hex characters.
const MinContained = 8

// Holds is the one rule for "this value holds a secret": value equals one
// of forms, or contains one of MinContained or more characters (a token
// pasted into "Bearer …" is still the token). Empty forms match nothing.
func Holds(value string, forms []string) bool {
	for _, s := range forms {
		if s == "" {
			continue
		}
		if value == s || len(s) >= MinContained && strings.Contains(value, s) {
			return true
		}
	}
	return false
}

// Former is a secret that lists the ways its value can be written out,
// where Holds should find it.
type Former interface{ Forms() []string }

// Forms of a String: its value.
func (s String) Forms() []string { return []string{s.v} }

// Forms of Bytes: raw, and standard base64 (how keys travel in JSON and
// environment variables).
func (b Bytes) Forms() []string {
	return []string{string(b.v), base64.StdEncoding.EncodeToString(b.v)}
}

// AllForms lists every form of every secret, for Holds.
func AllForms(secrets ...Former) []string {
	var out []string
	for _, s := range secrets {
		out = append(out, s.Forms()...)
	}
	return out
}
