// Command image builds (or finds cached) the local candidate image that
// `head serve --provider docker` rents: a Debian minbase rootfs with python3
// from debootstrap, imported into Docker, plus real Ray (-ray-version, from
// -ray-wheels or the package index) or the stand-in ray package from
// test/fakeray. It prints the image name. Run from the repo root, as root:
//
//	go run ./test/image [-ray-version V [-ray-wheels DIR]] [-fakeray DIR] [-env KEY=value]...
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var env listFlag
	fakeray := flag.String("fakeray", "", "stand-in ray package dir (default: test/fakeray)")
	flag.Var(&env, "env", "KEY=value baked into the image (repeatable)")
	base := flag.String("base", "", "base image: debootstrap, host (the host's python3 and tools), or empty for debootstrap with host as fallback")
	rayVersion := flag.String("ray-version", "", "real Ray's version (e.g. 2.60.0); empty: the stand-in")
	rayWheels := flag.String("ray-wheels", "", "folder of Ray's wheels (default: the package index)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	name, err := candidateimage.Build(ctx, candidateimage.Config{FakerayDir: *fakeray, Env: env, Base: *base, Log: log,
		RayVersion: *rayVersion, RayWheels: *rayWheels})
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	log.Info("image ready", "image", name, "took", time.Since(start).Round(time.Millisecond))
	fmt.Println(name)
}
