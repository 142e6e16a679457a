package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rayvast/rayvast/head/nodeview"
	"github.com/rayvast/rayvast/internal/wire"
)

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state dir of the running head")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: head node --state DIR NODE

Prints one node's story: its candidate's and node's states with times, the
host checks and GPUs it reports, Ray's state and restarts, its last
heartbeat and health, and the last lines of its agent log when the node
serves logs. NODE is an instance ID, a candidate ID or a unique prefix of
either.

`)
		fs.PrintDefaults()
	}
	if code, ok := parseNodeFlags(fs, args); !ok {
		return code
	}
	st, m, code := lookupNode(ctx, *state, fs.Arg(0), stderr)
	if code != 0 {
		return code
	}
	s := nodeview.Story{Match: m, Now: time.Now()}
	if m.Node != nil && m.Node.State == wire.StateEnrolled {
		r := reader(st)
		if info, err := r.Info(ctx, *m.Node); err != nil {
			s.InfoErr = err
		} else {
			s.Info = &info
		}
		s.AgentLog, s.LogErr = r.Log(ctx, *m.Node, "agent")
	}
	s.Print(stdout)
	return 0
}
