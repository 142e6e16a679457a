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
