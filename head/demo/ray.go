package demo

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/internal/rayenv"
)

// standIn is the --ray value that chooses the stand-in Ray (test/fakeray).
const standIn = "stand-in"

// prepareRay chooses the cluster's Ray and returns the candidate image:
// real Ray by default (a venv on this machine for the Ray head, the same
// Ray copied into the image), the stand-in when asked for, or when real Ray
// cannot be had here and no version was asked for.
func (d *demo) prepareRay(ctx context.Context) (string, error) {
	if d.o.ray == standIn {
		return d.standInImage(ctx)
	}
	version := d.o.ray
	if version == "" {
		version = rayenv.Newest
	}
	img, err := d.realRay(ctx, version)
	if err == nil {
		return img, nil
	}
	if d.o.ray != "" || ctx.Err() != nil {
		return "", err
	}
	d.say("· real Ray %s cannot be had here: %v", version, err)
	d.say("  running the stand-in Ray instead (--ray %s chooses it; --ray-wheels DIR installs real Ray from a folder)", standIn)
	return d.standInImage(ctx)
}

// realRay makes (or finds) the venv of version and the image carrying it.
func (d *demo) realRay(ctx context.Context, version string) (string, error) {
	wheels := d.o.rayWheels
	if wheels == "" {
		for _, root := range []string{filepath.Join(filepath.Dir(d.exe), ".."), "."} {
			if w := rayenv.SharedWheels(root); w != "" {
				wheels = w
				break
			}
		}
	}
	from := "the package index"
	if wheels != "" {
		from = wheels
	}
	dir := rayenv.Dir(version)
	if !rayenv.Ready(dir, version) {
		d.say("· real Ray %s: making a Python venv in %s from %s (once per version, about 20 s)", version, dir, from)
	}
	log := slog.New(slog.NewTextHandler(d.errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	py, err := rayenv.Ensure(ctx, rayenv.Config{Dir: dir, Version: version, Wheels: wheels, Log: log})
	if err != nil {
		return "", err
	}
	img := d.o.image
	if img == "" {
		d.say("· candidate image with real Ray %s: building or reusing (first run on a machine: about a minute of debootstrap)", version)
		t0 := time.Now()
		img, err = candidateimage.Build(ctx, candidateimage.Config{Engine: d.eng, Base: d.o.base, RayVersion: version, RayWheels: wheels, RayVenvDir: dir, Log: log})
		if err != nil {
			return "", err
		}
		d.say("  %s ready in %s", img, time.Since(t0).Round(100*time.Millisecond))
	}
	d.python, d.rayVersion = py, version
	return img, nil
}

// standInImage is the candidate image with the stand-in Ray.
func (d *demo) standInImage(ctx context.Context) (string, error) {
	if d.o.image != "" {
		return d.o.image, nil
	}
	d.say("· candidate image with the stand-in Ray: building or reusing (first run on a machine: about a minute of debootstrap)")
	t0 := time.Now()
	img, err := candidateimage.Build(ctx, candidateimage.Config{Engine: d.eng, FakerayDir: d.o.fakeray, Base: d.o.base})
	if err != nil {
		return "", fmt.Errorf("candidate image: %w", err)
	}
	d.say("  %s ready in %s", img, time.Since(t0).Round(100*time.Millisecond))
	return img, nil
}
