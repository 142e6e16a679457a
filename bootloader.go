// Package rayvast carries the files of the repository root that the binaries
// ship: bootloader.sh, so `head` can put it into rentals without a file next
// to the binary.
package rayvast

import (
	_ "embed"
	"strings"
)

//go:embed bootloader.sh
var bootloaderSource string

// Bootloader returns bootloader.sh as a rental's command: comment lines and
// blank lines dropped (vast's command field is small), the shebang kept.
func Bootloader() string {
	var b strings.Builder
	for i, line := range strings.Split(bootloaderSource, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || (strings.HasPrefix(t, "#") && !(i == 0 && strings.HasPrefix(t, "#!"))) {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// PythonSearch is bootloader.sh's own search for a Python that imports
// ray (docs/protocol.md §3 step 1): its lines from `P=` through the check that calls
// `die` when none was found, comments dropped. `head image-check` runs it
// in an image, with a die of its own, so the check looks exactly where a
// rental looks. It panics if bootloader.sh lost those lines (a test
// catches that).
func PythonSearch() string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(Bootloader(), "\n") {
		if strings.HasPrefix(line, "P=") {
			in = true
		}
		if !in {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
		if strings.HasPrefix(line, `[ -n "$P" ] || die`) {
			return b.String()
		}
	}
	panic("bootloader.sh: no Python search (a `P=` line ending with `[ -n \"$P\" ] || die`)")
}
