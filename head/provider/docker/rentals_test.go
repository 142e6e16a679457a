package docker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
)

// TestRentalsForDown: what `head down` uses lists and ends exactly one
// cluster's containers, refuses another cluster's, and creates nothing (no
// network, no DNS state) for a cluster that has none.
func TestRentalsForDown(t *testing.T) {
	eng := engine(t)
	img := testImageOn(t, eng, candidateimage.BaseHost)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := fmt.Sprintf("dtest-%d", time.Now().UnixNano()%1e9)
	a, b := base, base+"-b"
	t.Cleanup(func() {
		_ = vastnet.Cleanup(context.Background(), eng, func(c string) bool { return c == a || c == b })
	})
	rented := map[string]provider.Rental{}
	for _, cl := range []string{a, b} {
		p, err := New(ctx, Config{Engine: eng, Cluster: cl, Settings: Settings{Image: img}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Rent(ctx, provider.RentRequest{CandidateID: "c1", NodeType: "cpu", Command: "sleep 600"})
		if err != nil {
			t.Fatal(err)
		}
		rented[cl] = r
		p.Close()
	}
	ra, err := OpenRentals(eng, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ra.List(ctx)
	if err != nil || len(list) != 1 || list[0].InstanceID != rented[a].InstanceID || list[0].CandidateID != "c1" {
		t.Fatalf("List of %s = %+v, %v; want only %s", a, list, err, rented[a].InstanceID)
	}
	if err := ra.Destroy(ctx, rented[b].InstanceID); err == nil {
		t.Errorf("Destroy of cluster %s's container through %s: nil error", b, a)
	}
	if err := ra.Destroy(ctx, rented[a].InstanceID); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.InspectContainer(ctx, rented[b].InstanceID); err != nil {
		t.Errorf("cluster %s's container: %v, want it untouched", b, err)
	}
	if list, err := ra.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List after Destroy = %+v, %v; want none", list, err)
	}
	// Cleanup of a (head down of a stopped head): its networks and NAT
	// table go; cluster b keeps all three.
	if err := vastnet.Cleanup(ctx, eng, func(c string) bool { return c == a }); err != nil {
		t.Fatal(err)
	}
	nft := firewall.RunNft("nft")
	for cl, want := range map[string]bool{a: false, b: true} {
		for _, n := range []string{vastnet.NetworkName(cl), vastnet.PublicNetworkName(cl)} {
			if _, err := eng.InspectNetwork(ctx, n); (err == nil) != want {
				t.Errorf("network %s after the cleanup of a: %v, want kept=%v", n, err, want)
			}
		}
		if got := nft(ctx, "list table ip "+vastnet.TableName(cl)+"\n") == nil; got != want {
			t.Errorf("table ip %s of %s after the cleanup of a: kept=%v, want %v", vastnet.TableName(cl), cl, got, want)
		}
	}

	fresh := base + "-none"
	rf, err := OpenRentals(eng, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := rf.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List of an empty cluster = %+v, %v", list, err)
	}
	if _, err := eng.InspectNetwork(ctx, vastnet.NetworkName(fresh)); !errors.Is(err, dockerengine.ErrNotFound) {
		t.Errorf("network of %s after OpenRentals: %v, want none made", fresh, err)
	}
}
