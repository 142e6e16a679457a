// Package e2e runs rayvast end to end on the local Docker Engine: a real
// head process (`head up` or `head serve --provider docker`), real
// containers of the locally built candidate image running bootloader.sh,
// and the real agent. Tests of what Ray does run real Ray (rayharness_test.go:
// an image per Ray version, `head up` with the venv's Python). The tests
// of the agent's and head's own contract (exit codes crossing agent and
// container, signals, log streaming, secrets, enrollment) choose the
// stand-in Ray on purpose (suite.image): it exits with a chosen code on
// SIGTERM and prints a line every second, which real Ray cannot be made to
// do. It needs root and Docker; without them it skips loudly, and with
// CI=true it fails instead.
//
// TestMain builds bin/head and bin/agent once (CGO_ENABLED=0) and the
// stand-in's image once (real Ray's images are built on first use), removes leftovers of earlier runs by label, and removes every
// container and network of its clusters when it ends, failed tests included.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// clusterPrefix names every cluster this suite makes, so cleanup by label
// never touches a demo or another user's cluster. The process ID in it lets
// a run remove the leftovers of a killed run without touching the clusters
// of a run going on at the same time.
const clusterBase = "e2e-"

var clusterPrefix = clusterBase + strconv.Itoa(os.Getpid()) + "-"

// The stand-in Ray exits with this code on SIGTERM (baked into the suite's
// image), so `docker stop` can show the code crossing agent and container.
const rayExitCode = 42

// The stand-in Ray prints a tick line this often (baked into the image), so
// `head logs --follow` has new lines to show.
const fakerayTickS = 1

var suite struct {
	repo      string // repo root
	binDir    string
	head      string // built binaries
	agent     string
	image     string
	eng       *dockerengine.Client
	skip      string // why the suite does not run here
	bootCode  string // bootloader.sh's text, for the hash-mismatch rental
	buildTime time.Duration
}

func isOurs(cluster string) bool { return strings.HasPrefix(cluster, clusterPrefix) }

// isLeftover: a cluster of this suite whose run has ended (its process is
// gone), or of the older naming without a process ID.
func isLeftover(cluster string) bool {
	rest, ok := strings.CutPrefix(cluster, clusterBase)
	if !ok {
		return false
	}
	pid, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return true
	}
	return syscall.Kill(n, 0) == syscall.ESRCH
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	skip, err := setup()
	if suite.binDir != "" {
		defer os.RemoveAll(suite.binDir)
	}
	if err == nil && skip != "" && rvtest.InCI() {
		err = fmt.Errorf("%s (CI=true: the suite must run)", skip)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: %v\n", err)
		return 1
	}
	if skip != "" {
		suite.skip = skip
		fmt.Fprintf(os.Stderr, "\n*** e2e: SKIPPING the end-to-end suite: %s ***\n\n", skip)
		return m.Run() // every test skips with the reason
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := vastnet.Cleanup(ctx, suite.eng, isOurs); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: final cleanup: %v\n", err)
		}
	}()
	return m.Run()
}

// setup returns why the suite cannot run here (skip), or an error when it
// should run and something is broken.
func setup() (skip string, err error) {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("not root (euid %d): the suite rents Docker containers and listens on a Docker network", os.Geteuid()), nil
	}
	suite.eng = dockerengine.New("")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if _, err := suite.eng.Version(ctx); err != nil {
		return fmt.Sprintf("no Docker Engine: %v", err), nil
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		return "", err
	}
	suite.repo = repo
	// Leftovers of a run that was killed before its cleanup (not those of
	// a run going on at the same time).
	_ = vastnet.Cleanup(ctx, suite.eng, isLeftover)

	bin, err := os.MkdirTemp("", "rayvast-e2e-bin-")
	if err != nil {
		return "", err
	}
	suite.binDir = bin
	if suite.head, err = rvtest.BuildErr(bin, "./head"); err != nil {
		return "", err
	}
	if suite.agent, err = rvtest.BuildErr(bin, "./agent"); err != nil {
		return "", err
	}
	boot, err := os.ReadFile(filepath.Join(repo, "bootloader.sh"))
	if err != nil {
		return "", err
	}
	suite.bootCode = string(boot)
	start := time.Now()
	suite.image, err = candidateimage.Build(ctx, candidateimage.Config{
		Engine:     suite.eng,
		FakerayDir: filepath.Join(repo, "test", "fakeray"),
		Env:        []string{fmt.Sprintf("FAKERAY_EXIT_CODE=%d", rayExitCode), fmt.Sprintf("FAKERAY_TICK_S=%d", fakerayTickS)},
	})
	if err != nil {
		return "", fmt.Errorf("build image: %w", err)
	}
	suite.buildTime = time.Since(start)
	fmt.Fprintf(os.Stderr, "e2e: image %s ready in %s\n", suite.image, suite.buildTime.Round(time.Millisecond))
	return "", nil
}

// needSuite skips (or fails: see run) a test when the suite cannot run.
func needSuite(t testing.TB) {
	t.Helper()
	if suite.skip != "" {
		t.Skipf("SKIP e2e: %s", suite.skip)
	}
}
