package dockerengine

import (
	"regexp"
	"strings"
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// SafeName makes s usable in a container's or a network's name, which the
// Engine allows only of [A-Za-z0-9_.-] (runs of others become one "-"; ""
// becomes "default").
func SafeName(s string) string {
	s = unsafeName.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-.")
	if s == "" {
		s = "default"
	}
	return s
}
