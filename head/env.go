package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rayvast/rayvast/head/rayhead"
)

const envUsage = `usage: head env --state DIR [--address IP:PORT] [--python P]
       head run --state DIR [--address IP:PORT] [--python P] [--] COMMAND [ARG...]

What a Ray driver or "ray job submit" on the head's machine needs to use the
cluster that "head up" runs: RAY_ADDRESS (the Ray head), RAY_API_SERVER_ADDRESS
(its job API, by default http://%s), the Ray head's TLS files, RAY_AUTH_MODE=token with
RAY_AUTH_TOKEN_PATH (the token file; its value is never put in the env), and
the Ray head's Python first on PATH. "head env" prints it as shell export
lines; "head run" runs COMMAND with it (exec: COMMAND's exit code is head
run's). Examples:

  bin/head run --state STATE -- python job.py
  bin/head run --state STATE -- ray job submit --working-dir . -- python job.py

`

// runEnv is `head env` (run false) and `head run` (run true).
func runEnv(args []string, run bool, stdout, stderr io.Writer) int {
	name := "head env"
	if run {
		name = "head run"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state dir of head up")
	address := fs.String("address", "", "the Ray head's ip:port (default: the one head up runs)")
	python := fs.String("python", "", "the cluster's Python (default: the Ray head's)")
	fs.Usage = func() { fmt.Fprintf(fs.Output(), envUsage, rayhead.Dashboard); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *state == "" || run != (fs.NArg() > 0) {
		fs.Usage()
		return 2
	}
	env, err := clusterEnv(*state, *address, *python)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if !run {
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, "RAY_") || k == "PATH" {
				fmt.Fprintf(stdout, "export %s=%s\n", k, shellQuote(v))
			}
		}
		return 0
	}
	argv := fs.Args()
	bin := argv[0]
	if !strings.Contains(bin, "/") {
		// Looked up in the env COMMAND gets (the cluster's Python first).
		for _, dir := range filepath.SplitList(envValue(env, "PATH")) {
			if p := filepath.Join(dir, bin); isExecutable(p) {
				bin = p
				break
			}
		}
	}
	if err := syscall.Exec(bin, argv, env); err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", name, argv[0], err)
		return 127
	}
	return 0 // not reached
}

// clusterEnv is this process's environment set up for the cluster of state.
func clusterEnv(state, address, python string) ([]string, error) {
	st, ok, err := rayhead.ReadStatus(state)
	if err != nil {
		return nil, err
	}
	if address == "" {
		if !ok {
			return nil, fmt.Errorf("no Ray head of head up in %s (start the cluster with head up, or give --address)", state)
		}
		address = st.Address
	}
	if python == "" {
		python = st.Python
	}
	dir := filepath.Join(state, rayhead.FilesDir)
	f := rayhead.FilesIn(dir)
	for _, p := range []string{f.CA, f.Cert, f.Key, f.Token} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the Ray head's files: %w (head up makes them; head ray-head-cert --out %s for a Ray head elsewhere)", err, dir)
		}
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	f = rayhead.Files{CA: abs(f.CA), Cert: abs(f.Cert), Key: abs(f.Key), Token: abs(f.Token)}
	dashboard := rayhead.Dashboard
	if ok && st.Dashboard != "" {
		dashboard = st.Dashboard
	}
	return rayhead.ClientEnv(os.Environ(), f, address, dashboard, python), nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// shellQuote quotes s for POSIX sh when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
