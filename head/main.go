// Command head is rayvast's trusted half: it owns the cluster CA and decides
// which rented containers may join (docs/protocol.md §1, §8).
//
//	head init   --state DIR --ip IP [--dns NAME] [--cluster NAME]
//	head up     --config FILE [--state DIR] [--no-ray-head] [--down-on-exit]
//	head serve  --state DIR --config FILE [--agent FILE] [--shim FILE] --listen-a ADDR --listen-b ADDR [--provider none|docker|vast]
//	head status --state DIR
//	head logs   --state DIR NODE [--ray|--agent] [--tail N] [--follow]
//	head node   --state DIR NODE
//	head down   --state DIR [--config FILE] [--provider none|docker|vast]
//	head ray-head-cert --state DIR --ip IP --out DIR
//	head ray-env [--version V] [--wheels DIR] [--dir DIR]
//	head env    --state DIR
//	head run    --state DIR [--] COMMAND [ARG...]
//	head image-check --config FILE [IMAGE]
//	head demo   [flags]
//	head version
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rayvast/rayvast/head/demo"
)

const usage = `usage: head <command> [flags]

commands:
  up       the whole cluster from one config file: init, Ray head, serve
  init     create a new state dir: cluster CA, head certificate, cluster token, app id and key
  serve    serve port A (enrollment), port B (heartbeats) and the admin API on STATE/admin.sock
  status   print the candidates and nodes of a running head (from STATE/admin.sock)
  logs     print a node's agent or Ray log (over its guest API; needs "public_logs": true)
  node     print one node's story: states, checks, GPUs, Ray, heartbeats, health, log
  down     end the cluster: every candidate and every rental the provider lists
  ray-head-cert
           write the TLS files and token file the Ray head needs, print its env
  env      print the env a Ray driver or "ray job submit" on this machine needs for the cluster
  run      run a command (a Ray driver, "ray job submit") with that env
  ray-env  make (or find) a Python venv with real Ray; print its Python
  image-check
           run an image on this machine's Docker as a rental starts it: would it enroll and run Ray?
  version  print the SHA-256 of this binary and of the agent built into it
  demo     try the whole flow on this machine's Docker Engine: 3 candidates, one unsafe

Run "head <command> --help" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the exit code: 0 ok, 1 failure,
// 2 bad usage or invalid config.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "init":
		return runInit(args[1:], stdout, stderr)
	case "up":
		return runUp(ctx, args[1:], stdout, stderr)
	case "version":
		return runVersion(stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], stderr)
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "logs":
		return runLogs(ctx, args[1:], stdout, stderr)
	case "node":
		return runNode(ctx, args[1:], stdout, stderr)
	case "ray-head-cert":
		return runRayHeadCert(args[1:], stdout, stderr)
	case "env":
		return runEnv(args[1:], false, stdout, stderr)
	case "run":
		return runEnv(args[1:], true, stdout, stderr)
	case "ray-env":
		return runRayEnv(ctx, args[1:], stdout, stderr)
	case "down":
		return runDown(ctx, args[1:], stdout, stderr)
	case "image-check":
		return runImageCheck(ctx, args[1:], stdout, stderr)
	case "demo":
		return demo.Run(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "head: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
