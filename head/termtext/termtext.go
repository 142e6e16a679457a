// Package termtext makes text from elsewhere (a provider, the admin API, a
// node, a container's log) safe to print on the operator's terminal: `head
// status` and `head demo` pass every field they print through Inert.
package termtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Inert returns s with every rune a terminal could act on replaced by '?':
// C0 and C1 controls (ESC, BEL, CR, LF, TAB, the 8-bit CSI), format
// characters (bidi overrides, zero-width joiners: text that displays other
// than it reads), and bytes that are not UTF-8. A tab would also break
// tabwriter's columns; a newline would forge a row.
func Inert(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
