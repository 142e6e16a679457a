package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/guestclient"
	"github.com/rayvast/rayvast/head/nodeview"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/termtext"
)

// followEvery is how often `head logs --follow` asks again.
const followEvery = time.Second

func runLogs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state dir of the running head")
	ray := fs.Bool("ray", false, "show Ray's log")
	agent := fs.Bool("agent", false, "show the agent's log (the default)")
	tail := fs.Int("tail", 0, "show only the last N lines (0: the whole tail the node serves, up to 256 KiB)")
	follow := fs.Bool("follow", false, "keep printing new lines until Ctrl-C")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: head logs --state DIR NODE [--ray|--agent] [--tail N] [--follow]

Prints a node's agent or Ray log, fetched over the node's guest API with a
short-lived token the head mints (scope guest:logs only) and the node's
certificate checked against the cluster CA. NODE is an instance ID, a
candidate ID or a unique prefix of either. Nodes serve logs only when the
cluster config has "public_logs": true at the time they were created.

`)
		fs.PrintDefaults()
	}
	if code, ok := parseNodeFlags(fs, args); !ok {
		return code
	}
	if *ray && *agent {
		fmt.Fprintln(stderr, "head logs: --ray and --agent exclude each other")
		return 2
	}
	name := "agent"
	if *ray {
		name = "ray"
	}
	st, m, code := lookupNode(ctx, *state, fs.Arg(0), stderr)
	if code != 0 {
		return code
	}
	if m.Node == nil {
		fmt.Fprintf(stderr, "head logs: %s never enrolled (candidate %s is %s): it has no guest API to ask; see head node %s\n",
			m.ID(), m.Candidate.CandidateID, m.Candidate.State, m.ID())
		return 1
	}
	r := reader(st)
	var prev []byte
	for first := true; ; first = false {
		b, err := r.Log(ctx, *m.Node, name)
		if err != nil && !(ctx.Err() != nil && !first) {
			fmt.Fprintf(stderr, "head logs: %v\n", err)
			if errors.Is(err, nodeview.ErrLogsOff) {
				return 1
			}
			if first || !*follow {
				return 1
			}
		}
		if err == nil {
			out := nodeview.NewSince(prev, b)
			if first {
				out = nodeview.LastLines(b, *tail)
			}
			fmt.Fprint(stdout, termtext.Lines(string(out)))
			prev = b
		}
		if !*follow {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(followEvery):
		}
	}
}

// parseNodeFlags parses flags that need --state and one NODE argument
// (flags may come after it). ok false: return code.
func parseNodeFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0, false
			}
			return 2, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if fs.Lookup("state").Value.String() == "" || len(pos) != 1 {
		fs.Usage()
		return 2, false
	}
	_ = fs.Parse(pos) // leaves NODE as fs.Arg(0)
	return 0, true
}

// lookupNode loads the state dir and finds NODE among the running head's
// candidates and nodes. code != 0: the error was printed.
func lookupNode(ctx context.Context, state, name string, stderr io.Writer) (*statedir.State, nodeview.Match, int) {
	st, err := statedir.Load(state)
	if err != nil {
		fmt.Fprintf(stderr, "head: %v\n", err)
		return nil, nodeview.Match{}, 1
	}
	c := adminclient.Unix(filepath.Join(state, statedir.AdminSocket), 30*time.Second)
	snap, err := c.Snapshot(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "head: %v\n", err)
		return nil, nodeview.Match{}, 1
	}
	m, err := nodeview.Resolve(snap.Candidates, snap.Nodes, name)
	if err != nil {
		fmt.Fprintf(stderr, "head: %s\n", termtext.Field(err.Error()))
		return nil, nodeview.Match{}, 1
	}
	return st, m, 0
}

func reader(st *statedir.State) nodeview.Reader {
	pool := x509.NewCertPool()
	pool.AddCert(st.CA.Cert)
	return nodeview.Reader{Client: guestclient.Client{CA: pool}, AppID: st.AppID, AppRootKey: st.AppRootKey}
}
