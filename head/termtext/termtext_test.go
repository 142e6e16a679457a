package termtext

import "testing"

func TestFieldAndLines(t *testing.T) {
	for _, c := range []struct{ in, field, lines string }{
		{"plain", "plain", "plain"},
		{"a\x1b[2Jb", "a?[2Jb", "a?[2Jb"},
		{"bell\a", "bell?", "bell?"},
		{"two\nlines\r", "two?lines?", "two\nlines?"},
		{"tab\there", "tab?here", "tab\there"},
		{"c1 \u009b31m", "c1 ?31m", "c1 ?31m"},
		{"bad \xff utf8", "bad ? utf8", "bad ? utf8"},
		{"ls\u2028sep", "ls?sep", "ls?sep"},
		{"日本語", "日本語", "日本語"},
	} {
		if got := Field(c.in); got != c.field {
			t.Errorf("Field(%q) = %q, want %q", c.in, got, c.field)
		}
		if got := Lines(c.in); got != c.lines {
			t.Errorf("Lines(%q) = %q, want %q", c.in, got, c.lines)
		}
	}
}

// TestFieldTableCells: what `head status` and `head demo` print per field.
func TestFieldTableCells(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "vast-host-4711 203.0.113.9", "vast-host-4711 203.0.113.9"},
		{"unicode kept", "Grüße ✓", "Grüße ✓"},
		{"OSC title", "\x1b]0;pwned\x07", "?]0;pwned?"},
		{"newline forges a row", "h1\nc-evil\tgpu", "h1?c-evil?gpu"},
		{"bidi override", "abc\u202edcb", "abc?dcb"},
		{"zero width joiner", "a\u200db", "a?b"},
		{"invalid utf-8 run", "a\xff\xfeb", "a?b"},
		{"DEL", "a\x7fb", "a?b"},
	} {
		if got := Field(tc.in); got != tc.want {
			t.Errorf("%s: Field(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}
