package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/imagecheck"
	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/head/shim"
	"github.com/rayvast/rayvast/head/termtext"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/wire"
)

const imageCheckUsage = `usage: head image-check --config FILE [IMAGE]

Runs IMAGE on this machine's Docker the way a vast rental starts it
(/bin/sh -c in place of its entrypoint, NET_RAW and NET_ADMIN dropped, no
network) with a probe in place of the bootloader's download, and prints a
table of what the head would refuse and why: no sh, the bootloader's
commands, a noexec temp dir, no Python that imports ray where the
bootloader looks, Ray or Python not the config's (enrollment's rule), the
shim's native library unable to load, EXPOSE ports (counted against vast's
64), the size, and the CUDA version against each GPU node type's
cuda_max_good. It never pulls, never contacts vast, and removes its
container. IMAGE defaults to the image the config's vast provider rents
(every node type's must be one), or the docker provider's image.

Exit 0 when a rental of IMAGE would enroll and run Ray, 1 when not (or
the check could not run), 2 on bad usage or an invalid config.

`

func runImageCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head image-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "the cluster's config file")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), imageCheckUsage)
		fs.PrintDefaults()
	}
	// IMAGE may come before the flags too.
	var image string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		image, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2
	}
	if fs.NArg() > 1 || (fs.NArg() == 1 && image != "") || *cfgPath == "" {
		fs.Usage()
		return 2
	}
	if fs.NArg() == 1 {
		image = fs.Arg(0)
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "head image-check: %s\n", termtext.Field(err.Error()))
		return 2
	}
	var settings vast.Settings
	if p := cfg.Provider; p != nil && p.Kind == wire.ProviderVast {
		settings = *p
	}
	if image == "" {
		if image, err = configImage(cfg); err != nil {
			fmt.Fprintf(stderr, "head image-check: %v\n", err)
			return 2
		}
	}
	filters := map[string]float64{}
	for name, nt := range cfg.NodeTypes {
		if nt.GPUs > 0 {
			filters[name] = vast.NodeFilters(settings, name, image).CUDAMaxGood
		}
	}
	content, libs := shim.Default()
	res, err := imagecheck.Run(ctx, imagecheck.Config{Engine: dockerengine.New(""), Image: image,
		RayVersion: cfg.Ray.Version, PythonVersion: cfg.Ray.PythonVersion, CUDAFilters: filters,
		Shim: content, ShimNative: len(libs) > 0})
	if err != nil {
		fmt.Fprintf(stderr, "head image-check: %s\n", termtext.Field(err.Error()))
		return 1
	}
	res.Print(stdout)
	if !res.OK() {
		return 1
	}
	return 0
}

// configImage is the image the config's provider rents: vast's (one for
// every node type, else the user must name one) or docker's.
func configImage(cfg *config.Config) (string, error) {
	p := cfg.Provider
	switch {
	case p != nil && p.Kind == wire.ProviderVast:
		images := map[string]bool{}
		for name := range cfg.NodeTypes {
			images[vast.NodeSpec(*p, name).Image] = true
		}
		if len(images) == 1 {
			return slices.Collect(maps.Keys(images))[0], nil
		}
		return "", fmt.Errorf("the node types rent %d images (%s): name the one to check", len(images), strings.Join(slices.Sorted(maps.Keys(images)), ", "))
	case p != nil && p.Kind == wire.ProviderDocker && p.Image != "":
		return p.Image, nil
	}
	return "", errors.New("the config names no image (no vast provider block, no docker image): name IMAGE")
}
