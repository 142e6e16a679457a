// Command fakevast serves a fake of vast.ai's REST API (see README.md) on
// loopback, renting local Docker containers, so `head serve --provider vast`
// runs its whole flow on one machine:
//
//	fakevast --listen 127.0.0.1:8700 --key-file key.txt [--image IMG] [--start-delay 3s]
//
// It prints one JSON line: {"base_url","gateway","network"}. Point the head
// at it with RAYVAST_VAST_URL=<base_url> and `head init --ip <gateway>`.
// Instances outlive the fake (as at vast); `fakevast --cleanup` removes them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fakevast", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address of the fake API (loopback)")
	keyFile := fs.String("key-file", "", "file holding the API key requests must carry (or env FAKEVAST_KEY)")
	image := fs.String("image", "", "image for rentals whose image is not on this machine (default: build the candidate image)")
	name := fs.String("name", "fakevast", "labels the containers and names the network")
	delay := fs.Duration("start-delay", 3*time.Second, "create → running")
	minInterval := fs.Duration("min-interval", 0, "429 for requests to one endpoint closer than this (replaces vast's own per-endpoint limits)")
	noLimits := fs.Bool("no-limits", false, "no rate limits at all (default: vast's per-endpoint limits)")
	refuse := fs.Int("refuse-destroys", 0, "answer this many destroys 200 {\"success\": false} first")
	offers := fs.Int("offers", 8, "how many offers (distinct hosts and machines)")
	unsafe := fs.String("unsafe-hosts", "", "comma list of host IDs whose containers keep NET_RAW")
	stopped := fs.String("stopped-hosts", "", "comma list of host IDs whose machines start instances stopped (create: success false with new_contract)")
	quota := fs.Int("search-quota", 0, "searches per UTC day before 429 search_quota_exceeded (0: none)")
	retryAfter := fs.Duration("retry-after", 0, "put Retry-After on every 429 (0: none, as vast's reference says)")
	oversell := fs.Bool("oversell", false, "sell an offer again while rented (vast does when two creates race)")
	noDocker := fs.Bool("no-docker", false, "run nothing: instances get documentation IPs (API only)")
	scoped := fs.Bool("scoped-key", false, "the account key lacks billing_read: GET /api/v1/invoices/ is refused (401)")
	cleanup := fs.Bool("cleanup", false, "remove every container of --name and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	eng := dockerengine.New("")
	if *cleanup {
		if err := fakevast.Cleanup(ctx, eng, *name); err != nil {
			fmt.Fprintf(stderr, "fakevast: cleanup: %v\n", err)
			return 1
		}
		return 0
	}
	key := os.Getenv("FAKEVAST_KEY")
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			fmt.Fprintf(stderr, "fakevast: %v\n", err)
			return 2
		}
		key = strings.TrimSpace(string(b))
	}
	if key == "" {
		fmt.Fprintln(stderr, "fakevast: no key: --key-file or FAKEVAST_KEY")
		return 2
	}
	list := fakevast.DefaultOffers(*offers)
	for _, h := range strings.Split(*unsafe, ",") {
		if id, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64); err == nil {
			for i := range list {
				if list[i].HostID == id {
					list[i].Unsafe = true
				}
			}
		}
	}
	for _, h := range strings.Split(*stopped, ",") {
		if id, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64); err == nil {
			for i := range list {
				if list[i].HostID == id {
					list[i].StartsStopped = true
				}
			}
		}
	}
	cfg := fakevast.Config{Key: key, Offers: list, StartDelay: *delay, MinInterval: *minInterval, NoLimits: *noLimits, RefuseDestroys: *refuse,
		SearchQuota: *quota, RetryAfter: *retryAfter, Oversell: *oversell, ScopedKey: *scoped, Log: log}
	out := map[string]string{}
	if !*noDocker {
		img := *image
		if img == "" {
			var err error
			if img, err = candidateimage.Build(ctx, candidateimage.Config{Engine: eng, Log: log}); err != nil {
				fmt.Fprintf(stderr, "fakevast: %v\n", err)
				return 1
			}
		}
		d, err := fakevast.OpenDocker(ctx, fakevast.DockerConfig{Engine: eng, Name: *name, Image: img, Log: log})
		if err != nil {
			fmt.Fprintf(stderr, "fakevast: %v\n", err)
			return 1
		}
		defer d.Close()
		cfg.Backend = d
		out["gateway"], out["network"] = d.Gateway().String(), d.NetworkName()
	}
	srv := fakevast.New(cfg)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "fakevast: %v\n", err)
		return 1
	}
	out["base_url"] = "http://" + ln.Addr().String()
	b, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(b))
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = hs.Close() }()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "fakevast: %v\n", err)
		return 1
	}
	srv.Wait()
	return 0
}
