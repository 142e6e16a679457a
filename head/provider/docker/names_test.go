package docker

import (
	"regexp"
	"strings"
	"testing"
)

// TestInstanceName: instance IDs must be 1–64 of [A-Za-z0-9._-] (SPEC §6)
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

// TestCandidateTag: the tag changes with any input and ignores nothing that
// goes into the image.
func TestCandidateTag(t *testing.T) {
	files := []treeFile{{rel: "ray/__init__.py", mode: 0o644, data: []byte("x")}}
	base := candidateTag("b:1", files, nil)
	changed := []string{
		candidateTag("b:2", files, nil),
		candidateTag("b:1", []treeFile{{rel: "ray/__init__.py", mode: 0o644, data: []byte("y")}}, nil),
		candidateTag("b:1", []treeFile{{rel: "ray/other.py", mode: 0o644, data: []byte("x")}}, nil),
		candidateTag("b:1", files, []string{"A=1"}),
	}
	for i, c := range changed {
		if c == base {
			t.Errorf("variant %d: same tag %s", i, c)
		}
	}
	if candidateTag("b:1", files, nil) != base {
		t.Error("tag not deterministic")
	}
}
