package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestDownStateAloneWaitsForDrains proves `head down --state DIR` alone
// (no config, no --provider: no rentals to sweep here) still leaves the
// enrolled nodes to a running head's drains when that head says over its
// admin API that it rents itself (docker or vast) and runs a Ray head;
// a head with an external provider (none), no head answering, or
// --no-drain end at once.
func TestDownStateAloneWaitsForDrains(t *testing.T) {
	dir := t.TempDir()
	b, _ := json.Marshal(rayhead.Status{State: rayhead.Running, Python: "/usr/bin/python3"})
	if err := os.WriteFile(filepath.Join(dir, rayhead.StateFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, statedir.AdminSocket)
	kind := wire.ProviderDocker
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(wire.ProviderStatus{Kind: kind})
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	wait := func(noDrain bool) time.Duration {
		t.Helper()
		tg := downTarget{st: &statedir.State{Dir: dir}, noDrain: noDrain,
			headKind: headProviderKind(context.Background(), adminclient.Unix(sock, 5*time.Second))}
		return tg.drainWait(false) // --state alone: no provider opened here
	}
	full := reconcile.DefaultDrainDeadline + 20*time.Second
	for _, c := range []struct {
		kind    string
		noDrain bool
		want    time.Duration
	}{
		{wire.ProviderDocker, false, full},
		{wire.ProviderVast, false, full},
		{wire.ProviderVast, true, 0},
		{wire.ProviderNone, false, 0},
	} {
		kind = c.kind
		if got := wait(c.noDrain); got != c.want {
			t.Errorf("head's provider %s, --no-drain %v: drain wait %s, want %s", c.kind, c.noDrain, got, c.want)
		}
	}
	srv.Close()
	if got := wait(false); got != 0 {
		t.Errorf("no head answering: drain wait %s, want 0", got)
	}
}
