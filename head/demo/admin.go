package demo

import (
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
)

// newAdminClient speaks the head's admin API on STATE/admin.sock
// (docs/protocol.md §8); the demo polls it, so one call may take 10 s.
func newAdminClient(socket string) *adminclient.Client {
	return adminclient.Unix(socket, 10*time.Second)
}
