// Package termtext makes text that came from a node, a provider or the admin
// API safe to print on the operator's terminal: nothing a stranger wrote can
// move the cursor, retitle the window or hide a line.
package termtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Field is one table cell or one line: control characters (ESC, BEL, CR,
// LF, TAB, C1 such as the 8-bit CSI), format characters (bidi overrides,
// zero-width joiners: text that displays other than it reads) and bytes
// that are not UTF-8 become '?'. A tab would also break tabwriter's
// columns; a newline would forge a row.
func Field(s string) string { return clean(s, false) }

// Lines is a multi-line text such as a log: as Field, but newlines and tabs
// are kept.
func Lines(s string) string { return clean(s, true) }

func clean(s string, keepLines bool) string {
	return strings.Map(func(r rune) rune {
		if keepLines && (r == '\n' || r == '\t') {
			return r
		}
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
