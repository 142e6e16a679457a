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
