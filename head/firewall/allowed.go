package firewall

import (
	"sort"

	"github.com/rayvast/rayvast/internal/wire"
)

// AllowedIPs are the public IPs the table lets in: those of the
// candidates that are running or enrolled, sorted, each once.
func AllowedIPs(cands []wire.Candidate) []string {
	ips := []string{}
	seen := map[string]bool{}
	for _, c := range cands {
		if c.PublicIP != "" && !seen[c.PublicIP] && (c.State == wire.StateRunning || c.State == wire.StateEnrolled) {
			seen[c.PublicIP] = true
			ips = append(ips, c.PublicIP)
		}
	}
	sort.Strings(ips)
	return ips
}
