package secret

import (
	"encoding/base64"
	"testing"
)

// TestHolds: equal or contained values hold a secret; a short secret is
// matched only whole; an empty one matches nothing.
func TestHolds(t *testing.T) {
	forms := []string{"tok-0123456789", "short", ""}
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"tok-0123456789", true},
		{"Bearer tok-0123456789", true},
		{"short", true},
		{"not-so-short-value", false}, // "short" is under MinContained: matched only whole
		{"a short word", false},
		{"", false},
		{"innocent", false},
	} {
		if got := Holds(tc.value, forms); got != tc.want {
			t.Errorf("Holds(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
}

// TestAllForms: Bytes count raw and in base64, Strings as they are.
func TestAllForms(t *testing.T) {
	key := []byte("0123456789abcdef-key")
	forms := AllForms(New("join-token-abcdef"), NewBytes(key))
	for _, v := range []string{"join-token-abcdef", string(key), "KEY=" + base64.StdEncoding.EncodeToString(key)} {
		if !Holds(v, forms) {
			t.Errorf("Holds(%q) = false, want true", v)
		}
	}
	if len(forms) != 3 {
		t.Errorf("got %d forms, want 3: %q", len(forms), forms)
	}
}
