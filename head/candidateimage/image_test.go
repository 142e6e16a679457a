package candidateimage

import (
	"context"
	"fmt"
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

// TestDebianBaseWinsOverCachedHostBase: with the host-files base already
// built (as the docker provider's tests build it) and debootstrap working,
// the default base is the Debian one, not the cached fallback: the image
// tests derive from it with Debian's tools (mv, ln). The debootstrap here
// is a script writing a one-file root, under a mirror of its own so its
// tag is this test's alone.
func TestDebianBaseWinsOverCachedHostBase(t *testing.T) {
	rvtest.NeedDocker(t)
	eng := dockerengine.New("")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := Config{Engine: eng, FakerayDir: "../../test/fakeray", Base: BaseHost}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	host, err := ensureBase(ctx, cfg)
	if err != nil {
		rvtest.Need(t, "the host-files base: "+err.Error())
	}
	fake := t.TempDir() + "/debootstrap"
	script := "#!/bin/sh\n# args: --variant=minbase --include=... SUITE ROOT MIRROR\nmkdir -p \"$4/etc\" && echo fake > \"$4/etc/hostname\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Base, cfg.Debootstrap = "", fake
	cfg.Mirror = fmt.Sprintf("http://127.0.0.1:9/only-this-test-%d", time.Now().UnixNano())
	got, err := ensureBase(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.RemoveImage(context.Background(), got, true) })
	if want := BaseRepo + ":" + baseTag(cfg.Suite, cfg.Mirror, cfg.Packages); got != want {
		t.Errorf("base = %s, want the Debian one %s (the cached host base is %s)", got, want, host)
	}
}
