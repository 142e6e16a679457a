package termtext

import "testing"

func TestInert(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "vast-host-4711 203.0.113.9", "vast-host-4711 203.0.113.9"},
		{"unicode kept", "Grüße ✓", "Grüße ✓"},
		{"CSI clear screen", "a\x1b[2Jb", "a?[2Jb"},
		{"OSC title", "\x1b]0;pwned\x07", "?]0;pwned?"},
		{"newline forges a row", "h1\nc-evil\tgpu", "h1?c-evil?gpu"},
		{"carriage return", "ok\rbad", "ok?bad"},
		{"8-bit CSI", "a\u009b31mb", "a?31mb"},
		{"bidi override", "abc\u202edcb", "abc?dcb"},
		{"zero width joiner", "a\u200db", "a?b"},
		{"invalid utf-8", "a\xff\xfeb", "a?b"},
		{"DEL", "a\x7fb", "a?b"},
	} {
		if got := Inert(tc.in); got != tc.want {
			t.Errorf("%s: Inert(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}
