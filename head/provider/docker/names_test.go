package docker

import (
	"regexp"
	"strings"
	"testing"
)

// TestInstanceName: instance IDs must be 1–64 of [A-Za-z0-9._-] (docs/protocol.md §6)
// whatever the cluster and candidate IDs look like, and distinct.
func TestInstanceName(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	tests := []struct{ cluster, cand, want string }{
		{"demo", "c1", "rv-demo-c1"},
		{"my cluster/1", "cand:7", "rv-my-cluster-1-cand-7"},
		{"", "", "rv-default-default"},
	}
	for _, tt := range tests {
		if got := InstanceName(tt.cluster, tt.cand); got != tt.want {
			t.Errorf("InstanceName(%q, %q) = %q, want %q", tt.cluster, tt.cand, got, tt.want)
		}
	}
	long1 := InstanceName(strings.Repeat("x", 80), "a")
	long2 := InstanceName(strings.Repeat("x", 80), "b")
	if !valid.MatchString(long1) || long1 == long2 {
		t.Errorf("long names %q %q: want valid and distinct", long1, long2)
	}
}
