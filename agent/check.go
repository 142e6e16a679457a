package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/agent/hostcheck"
	"github.com/rayvast/rayvast/agent/raylaunch"
	"github.com/rayvast/rayvast/internal/wire"
)

const checkUsage = `usage: agent check [--root DIR] [--public-ip IP] [--resolvers LIST] [--python PATH]

Runs the host checks enrollment sends (capabilities, netns, shm, egress,
GPUs, Ray) alone and prints them as JSON
({"checks":{…},"gpus":n,"gpu_models":[…],"ray_version":…,"python_version":…}).
Exit 0 when capabilities, netns, shm and egress all pass, 1 otherwise, 2 on
bad flags. For operators vetting an image or host. The GPU count and models
and the Ray and Python versions are reported, judged by the head at
enrollment (Ray 2.52 or newer, and the config's ray.version and
ray.python_version where set).

  --root DIR        host root the /proc, /dev and /sys paths are built from (default /)
  --public-ip IP    the IP egress must be seen from
                    (default $RAYVAST_PUBLIC_IP, else $PUBLIC_IPADDR)
  --resolvers LIST  who-am-I resolvers, comma list of kind@ip:port, kinds
                    opendns, google, cloudflare (default $RAYVAST_EGRESS_RESOLVERS,
                    else the public resolvers)
  --python PATH     the Python whose ray.__version__ is reported
                    (default $RAYVAST_PYTHON, else python3)
`

// checkCommand runs the host checks. secrets were taken out of the
// environment before dispatch, so the version probe's env is scrubbed of
// them by value (a copy may sit in another variable).
func checkCommand(args []string, secrets envconfig.Secrets, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	root := fs.String("root", "/", "")
	publicIP := fs.String("public-ip", firstEnv(wire.EnvPublicIP, wire.EnvVastPublicIP), "")
	resolvers := fs.String("resolvers", os.Getenv(wire.EnvEgressResolvers), "")
	python := fs.String("python", firstEnv(wire.EnvPython), "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, checkUsage)
			return 0
		}
		fmt.Fprintf(stderr, "agent check: %v\n\n%s", err, checkUsage)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agent check: unexpected argument %q\n\n%s", fs.Arg(0), checkUsage)
		return 2
	}
	res, err := parseResolvers(*resolvers)
	if err != nil {
		fmt.Fprintf(stderr, "agent check: --resolvers: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	report := hostcheck.Run(context.Background(), hostcheck.Config{Root: *root, PublicIP: *publicIP, Resolvers: res, Log: log})
	if *python == "" {
		*python = "python3"
	}
	v, err := hostcheck.ProbeRay(context.Background(), hostcheck.RayProbe{Python: *python,
		Env: raylaunch.Scrubbed(os.Environ(), secrets.Forms())})
	if err != nil {
		log.Warn("ray version probe failed", "err", err)
	}
	report.RayVersion, report.PythonVersion = v.Ray, v.Python
	out, _ := json.MarshalIndent(report, "", "  ")
	fmt.Fprintf(stdout, "%s\n", out)
	if !report.Checks.OK() {
		return 1
	}
	return 0
}

// parseResolvers reads a RAYVAST_EGRESS_RESOLVERS list; "" means the public
// resolvers (production default, docs/protocol.md §2).
func parseResolvers(s string) ([]hostcheck.Resolver, error) {
	if s == "" {
		return hostcheck.DefaultResolvers, nil
	}
	return hostcheck.ParseResolvers(s)
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
