package candidateimage

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
)

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

// TestBuildDebootstrapFailure: a debootstrap that fails is reported
// (with its output) when debootstrap was asked for explicitly.
func TestBuildDebootstrapFailure(t *testing.T) {
	rvtest.NeedDocker(t)
	eng := dockerengine.New("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fake := t.TempDir() + "/debootstrap"
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'E: cannot reach the mirror' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Build(ctx, Config{Engine: eng, FakerayDir: "../../test/fakeray", Base: BaseDebootstrap,
		Debootstrap: fake, Mirror: "http://127.0.0.1:9/unreachable"})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the mirror") {
		t.Errorf("err = %v, want debootstrap's own message", err)
	}
}
