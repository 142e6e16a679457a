package registry

import "testing"

// TestLiveNodeOnIP: step 7a's lookup sees enrolled nodes on the IP (in any
// spelling), not ended ones, not other IPs, and not the asking instance.
func TestLiveNodeOnIP(t *testing.T) {
	r := open(t, "", newClock())
	a := enrolled(t, r, "ip-a", "192.0.2.10")
	enrolled(t, r, "ip-b", "192.0.2.11")
	for _, c := range []struct {
		name, ip, except string
		want             string // instance found, "" = none
	}{
		{"same ip", "192.0.2.10", "other", "ip-a"},
		{"v4-mapped spelling", "::ffff:192.0.2.10", "other", "ip-a"},
		{"another ip", "192.0.2.12", "other", ""},
		{"the asking instance itself", "192.0.2.10", "ip-a", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, ok := r.LiveNodeOnIP(c.ip, c.except)
			if got := map[bool]string{true: n.InstanceID, false: ""}[ok]; got != c.want {
				t.Errorf("LiveNodeOnIP(%s, %s) = %q, want %q", c.ip, c.except, got, c.want)
			}
		})
	}
	if _, err := r.End(a.CandidateID, "deleted"); err != nil {
		t.Fatal(err)
	}
	if n, ok := r.LiveNodeOnIP("192.0.2.10", "other"); ok {
		t.Errorf("an ended node still holds its IP: %+v", n)
	}
}
