package e2e

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestGCSStoreOffNewest: `head up --gcs-store off` runs the GCS as Ray
// does by default, in memory: no store dir is made, head up says the store
// is off, and a kill -9 of gcs_server is a new cluster: the Ray head comes
// back with a new ID, both nodes' agents restart their Ray toward it, and
// the detached actor and placement group made before are gone. It is also
// the control of TestGCSFaultTolerance*: the same driver, the same kill,
// without the store, loses what those tests find kept.
func TestGCSStoreOffNewest(t *testing.T) {
	c := startRayCluster(t, rvtest.RayNewest, 2, "--gcs-store", "off")
	nodes := c.waitRunning(2, 5*time.Minute)
	ips := []string{nodes[0].PublicIP, nodes[1].PublicIP}
	before, _, _ := rayhead.ReadStatus(c.state)
	if before.Store != rayhead.StoreOff {
		t.Errorf("the Ray head's store with --gcs-store off: %q, want %q", before.Store, rayhead.StoreOff)
	}
	if _, err := os.Stat(filepath.Join(c.state, rayhead.StoreDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("--gcs-store off made %s (%v), want no store dir", rayhead.StoreDir, err)
	}
	if !strings.Contains(c.out.String(), "GCS store off") {
		t.Errorf("head up's output does not say the GCS store is off:\n%s", c.out.String())
	}

	c.ftDriver(t, "setup", ips)
	killHeadGCS(t, c.state)
	waitHeadBack(t, c.state, before)
	waitFor(t, 3*time.Minute, "both nodes' Ray restarted toward the new Ray head", func() (bool, string) {
		var says []string
		restarted := 0
		for _, n := range c.nodes() {
			says = append(says, n.Ray.State)
			if n.Ray.Restarts > 0 && n.Ray.State == wire.RayRunning {
				restarted++
			}
		}
		return restarted == 2, strings.Join(says, ", ")
	})
	if st, _, _ := rayhead.ReadStatus(c.state); st.ID == before.ID {
		t.Errorf("the Ray head's ID %s stayed across the GCS's kill with no store, want a new one (a new cluster)", st.ID)
	}
	var lost map[string]bool
	if err := json.Unmarshal([]byte(c.ftDriver(t, "lost", ips)), &lost); err != nil {
		t.Fatal(err)
	}
	if lost["actor"] || lost["pg"] {
		t.Errorf("with no GCS store, after the GCS's kill: the detached actor found %v, the placement group found %v; want both gone", lost["actor"], lost["pg"])
	}
}
