// Command agent is rayvast's node agent: started by bootloader.sh as PID 1
// in a rented container, it enrolls with the head, starts Ray and stays to
// supervise it (docs/protocol.md §5, §6, §9). It is static and never imports head/.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/agent/guestapi"
)

// version is the agent's release; `agent version` also prints the binary's
// SHA-256, the value RAYVAST_BOOTSTRAP_SHA256 pins.
const version = "0.1.0"

const usage = `usage: agent [run]           enroll with the head, start Ray, supervise it (PID 1)
       agent check [--root DIR] [--public-ip IP] [--resolvers LIST]
                                run the host checks alone, print them as JSON
       agent guest-api …        serve the guest API alone (agent guest-api --help)
       agent version            print the version and this binary's SHA-256

Each subcommand answers --help.
`

func main() {
	// Secrets leave the environment before anything else can read or
	// inherit them (docs/protocol.md §5 step 1); only `run` uses them. When they came
	// from the initial environment the binary re-executes itself, so that
	// /proc/1/environ, which Ray's workers can read, no longer holds them.
	secrets, inEnviron, err := envconfig.TakeSecrets()
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
	}
	if inEnviron {
		err := envconfig.Reexec(secrets, os.Args) // returns only on failure
		fmt.Fprintf(os.Stderr, "agent: warning: secrets stay readable in /proc/%d/environ: %v\n", os.Getpid(), err)
	}
	// Ray's workers run as our uid: keep them out of our memory too.
	if err := envconfig.Undumpable(); err != nil {
		fmt.Fprintf(os.Stderr, "agent: warning: %v\n", err)
	}
	os.Exit(dispatch(os.Args[1:], secrets, os.Stdout, os.Stderr))
}

func dispatch(args []string, secrets envconfig.Secrets, stdout, stderr io.Writer) int {
	cmd, rest := "run", args
	if len(args) > 0 {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCommand(rest, secrets, stdout, stderr)
	case "check":
		return checkCommand(rest, secrets, stdout, stderr)
	case "guest-api":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer stop()
		return guestapi.RunStandalone(ctx, rest, stdout, stderr)
	case "version":
		return versionCommand(rest, stdout, stderr)
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "agent: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
