package rayhead

import (
	"errors"
	"sort"

	"github.com/rayvast/rayvast/head/listenports"
)

// Listening lists what the Ray head of the state dir listens on:
// the supervised process (pid) and its descendants (gcs_server, raylet,
// the dashboard and its agent, workers), read from /proc.
func Listening(stateDir string) (pid int, ls []listenports.Listener, err error) {
	st, ok, err := ReadStatus(stateDir)
	if err != nil {
		return 0, nil, err
	}
	if !ok || st.PID <= 0 {
		return 0, nil, errors.New("ray head not running")
	}
	ls, err = listenports.Of("/", st.PID)
	return st.PID, ls, err
}

// FirewallPorts is the firewall's source of the Ray head's ports: those it
// listens on at an address other than loopback. They only grow while one
// Ray head process runs (a look at /proc races with processes opening and
// closing files, so one look may miss a port; a worker's closed port stays
// guarded, which costs nothing), and start again with a restarted one.
func FirewallPorts(stateDir string) func() ([]int, error) {
	var pid int
	seen := map[int]bool{}
	return func() ([]int, error) {
		now, ls, err := Listening(stateDir)
		if err != nil {
			return nil, err
		}
		if now != pid {
			pid, seen = now, map[int]bool{}
		}
		for _, p := range listenports.ExposedPorts(ls) {
			seen[p] = true
		}
		out := make([]int, 0, len(seen))
		for p := range seen {
			out = append(out, p)
		}
		sort.Ints(out)
		return out, nil
	}
}
