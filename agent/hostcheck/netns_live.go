package hostcheck

import (
	"github.com/vishvananda/netns"
)

// liveSharesPID1Netns compares this thread's netns with PID 1's by device
// and inode (a second source beside the readlink inodes). nil when either
// cannot be opened, e.g. no ptrace access to a PID 1 outside our container.
func liveSharesPID1Netns() *bool {
	self, err := netns.Get()
	if err != nil {
		return nil
	}
	defer self.Close()
	init, err := netns.GetFromPath("/proc/1/ns/net")
	if err != nil {
		return nil
	}
	defer init.Close()
	same := self.Equal(init)
	return &same
}
