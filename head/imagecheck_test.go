package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// imageCheckConfig writes a config whose vast block rents image for two
// GPU node types (a second image for the second, when given).
func imageCheckConfig(t *testing.T, image, image2 string) string {
	t.Helper()
	nt := ""
	if image2 != "" {
		nt = `, "node_types": {"b": {"image": "` + image2 + `"}}`
	}
	cfg := `{"cluster": "c1", "ray": {"head_address": "10.0.0.1:6379", "version": "2.53.0"},
 "node_types": {"a": {"gpus": 1, "max_workers": 1, "resources": {}, "labels": {}},
                "b": {"gpus": 1, "max_workers": 1, "resources": {}, "labels": {}}},
 "guest_api": {"anonymous_scopes": [], "external_issuers": []},
 "provider": {"kind": "vast", "image": "` + image + `"` + nt + `}}`
	p := filepath.Join(t.TempDir(), "cluster.json")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImageCheckUsage: bad usage and configs that name no single image
// exit 2, with the reason; no Docker needed.
func TestImageCheckUsage(t *testing.T) {
	two := imageCheckConfig(t, "img:one", "img:two")
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"cluster": 1}`), 0o600)
	for _, c := range []struct {
		args []string
		say  string
	}{
		{[]string{"image-check"}, "usage: head image-check"},
		{[]string{"image-check", "img:x"}, "usage: head image-check"}, // no --config
		{[]string{"image-check", "--config", two, "a", "b"}, "usage: head image-check"},
		{[]string{"image-check", "--config", two}, "the node types rent 2 images (img:one, img:two)"},
		{[]string{"image-check", "--config", bad, "img:x"}, "config"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.say) {
			t.Errorf("%q: exit %d, %q; want 2 saying %q", c.args, code, errb.String(), c.say)
		}
	}
}

// TestImageCheckExit: the config's image (the project's candidate image)
// exits 0 with the table; an image that is not local exits 1 saying to
// pull it.
func TestImageCheckExit(t *testing.T) {
	rvtest.NeedDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := candidateimage.Build(ctx, candidateimage.Config{Engine: dockerengine.New(""), FakerayDir: "../test/fakeray"})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"image-check", "--config", imageCheckConfig(t, img, "")}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "image "+img) || !strings.Contains(out.String(), "would enroll and run Ray") {
		t.Errorf("candidate image: exit %d, %s%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"image-check", "rayvast-imagecheck-test:absent", "--config", imageCheckConfig(t, img, "")}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "docker pull") {
		t.Errorf("absent image: exit %d, %s", code, errb.String())
	}
}

// TestImageCheckDefaultImage: without IMAGE, the image the vast block of
// examples/vast.json rents is the one checked.
func TestImageCheckDefaultImage(t *testing.T) {
	cfg, err := config.Load("../examples/vast.json")
	if err != nil {
		t.Fatal(err)
	}
	if img, err := configImage(cfg); err != nil || img != "rayproject/ray:2.53.0-py311-gpu" {
		t.Errorf("configImage = %q, %v; want examples/vast.json's image", img, err)
	}
}
