package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestNoPrintingPathRevealsTheValue proves that fmt verbs, JSON (also nested
// in a struct) and both slog handlers print the redaction, never the value.
func TestNoPrintingPathRevealsTheValue(t *testing.T) {
	const val = "sup3r-s3cret-value"
	s, b := New(val), NewBytes([]byte(val))
	type holder struct {
		S String
		B Bytes
		P *String
	}
	h := holder{S: s, B: b, P: &s}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		out = append(out, fmt.Sprintf(verb, s), fmt.Sprintf(verb, b), fmt.Sprintf(verb, h))
	}
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(js))
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "s", s, "b", b, "h", h)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "s", s, "b", b, "h", h)
	out = append(out, logs.String())
	for _, o := range out {
		if strings.Contains(o, val) || strings.Contains(o, fmt.Sprintf("%x", val)) {
			t.Errorf("secret leaked: %s", o)
		}
	}
	if s.Reveal() != val || string(b.Reveal()) != val {
		t.Error("Reveal lost the value")
	}
}

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"abc", "abc", true}, {"abc", "abd", false}, {"abc", "abcd", false}, {"", "", true}} {
		if got := New(c.a).Equal(New(c.b)); got != c.want {
			t.Errorf("Equal(%q,%q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
