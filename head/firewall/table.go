package firewall

import (
	"encoding/hex"

	"github.com/rayvast/rayvast/head/statedir"
)

// DefaultTable is the table of a head without readable state.
const DefaultTable = "rayvast"

// TableForStateDir names the nftables table of the head whose state is dir:
// "rayvast_" and the first 12 hex digits of its app id, so two heads on one
// machine (or `head down` of another cluster) never replace or remove each
// other's table. DefaultTable when dir holds no readable state.
func TableForStateDir(dir string) string {
	st, err := statedir.Load(dir)
	if err != nil {
		return DefaultTable
	}
	return TableFor(st.AppID)
}

// TableFor is TableForStateDir of a loaded state's app id.
func TableFor(appID string) string {
	if len(appID) < 12 {
		return DefaultTable
	}
	if _, err := hex.DecodeString(appID[:12]); err != nil {
		return DefaultTable
	}
	return "rayvast_" + appID[:12]
}
