package firewall

import (
	"encoding/hex"
)

// DefaultTable is the table of a head without a valid app id.
const DefaultTable = "rayvast"

// TableFor names the nftables table of the head whose state's app id is
// appID: "rayvast_" and its first 12 hex digits, so two heads on one
// machine (or `head down` of another cluster) never replace or remove each
// other's table. DefaultTable for an app id too short or not hex.
func TableFor(appID string) string {
	if len(appID) < 12 {
		return DefaultTable
	}
	if _, err := hex.DecodeString(appID[:12]); err != nil {
		return DefaultTable
	}
	return "rayvast_" + appID[:12]
}
