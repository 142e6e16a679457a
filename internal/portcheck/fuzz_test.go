package portcheck

import (
	"regexp"
	"testing"
)

var exactChallenge = regexp.MustCompile(`\ARAYVAST-PORTCHECK [0-9a-f]{32}\n\z`)

// The agent's parser never panics and accepts exactly the challenge format,
// returning the nonce that the head would have put in it.
func FuzzParseChallenge(f *testing.F) {
	for _, s := range []string{
		"RAYVAST-PORTCHECK 0123456789abcdef0123456789abcdef\n",
		"RAYVAST-PORTCHECK 0123456789ABCDEF0123456789abcdef\n",
		"RAYVAST-PORTCHECK 0123456789abcdef0123456789abcdef\r\n",
		"RAYVAST-PORTCHECK 0123456789abcdef0123456789abcde\n\n",
		"RAYVAST-PORTCHECK  123456789abcdef0123456789abcdef\n",
		"RAYVAST-PORTCHECK \n",
		"",
		"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		nonce, ok := parseChallenge(line)
		if want := exactChallenge.Match(line); ok != want {
			t.Fatalf("parseChallenge(%q) ok = %v, want %v", line, ok, want)
		}
		if ok && challenge(nonce) != string(line) {
			t.Fatalf("parseChallenge(%q) nonce %q does not rebuild the line", line, nonce)
		}
		if !ok && nonce != "" {
			t.Fatalf("parseChallenge(%q) refused but returned nonce %q", line, nonce)
		}
	})
}
