package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/rayvast/rayvast/internal/rayenv"
)

const rayEnvUsage = `usage: head ray-env [--version V] [--wheels DIR] [--dir DIR]

Makes (or finds) a Python venv with real Ray (ray[default]==V) and prints its
Python: the one "head up --python" and the candidate image use. Made once per
version under $RAYVAST_RAY_VENVS (default ~/.cache/rayvast/ray/V) with a
Python %s (Ray refuses nodes whose Python differs from the head's, and the
candidate image's Debian ships %s). Without --wheels it installs from the
package index; with it, from that folder only (pip --no-index).

`

// runRayEnv is `head ray-env`.
func runRayEnv(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head ray-env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", rayenv.Newest, "Ray version")
	wheels := fs.String("wheels", "", "local wheel folder (default: the package index)")
	dir := fs.String("dir", "", "venv dir (default: $RAYVAST_RAY_VENVS/VERSION or ~/.cache/rayvast/ray/VERSION)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), rayEnvUsage, rayenv.PythonMinor, rayenv.PythonMinor)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	py, err := rayenv.Ensure(ctx, rayenv.Config{Dir: *dir, Version: *version, Wheels: *wheels, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "head ray-env: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, py)
	return 0
}
