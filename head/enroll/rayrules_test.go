package enroll

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/head/rayversion"
	"github.com/rayvast/rayvast/internal/wire"
)

func TestGPUModelMatches(t *testing.T) {
	for _, c := range []struct {
		want     string
		reported []string
		gpus     int
		ok       bool
	}{
		{"", []string{"anything"}, 1, true},
		{"", nil, 2, true}, // no model configured: only the count is judged
		{"A100", []string{"NVIDIA A100-SXM4-80GB"}, 1, true},
		{"a100 sxm4", []string{"NVIDIA A100-SXM4-80GB"}, 1, true},
		{"NVIDIA A100_SXM4", []string{"nvidia a100-sxm4-80gb"}, 1, true},
		{"RTX 4090", []string{"NVIDIA GeForce RTX 4090"}, 1, true},
		{"RTX 4090", []string{"NVIDIA GeForce RTX 3090"}, 1, false},
		{"H100", []string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"}, 2, false}, // every GPU must match
		{"H100", []string{"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"}, 2, true},
		{"H100", []string{"NVIDIA H100 80GB HBM3"}, 2, false}, // a GPU without a model
		{"H100", []string{"NVIDIA H100 80GB HBM3", ""}, 2, false},
		{"A100 80GB", []string{"NVIDIA A100-SXM4-80GB"}, 1, false}, // contained, not fuzzy
		{"NVIDIA", []string{"Tesla T4"}, 1, true},                  // only "NVIDIA": nothing left to require
	} {
		if got := gpuModelMatches(c.want, c.reported, c.gpus); got != c.ok {
			t.Errorf("gpuModelMatches(%q, %q, %d) = %v, want %v", c.want, c.reported, c.gpus, got, c.ok)
		}
	}
}

func TestRayVersionProblem(t *testing.T) {
	for _, c := range []struct {
		ray, py, wantRay, wantPy string
		bad                      string // "" = accepted, else a word of the reason
	}{
		{"2.52.0", "3.10.4", "", "", ""},
		{"2.53.0", "3.11.7", "2.53.0", "3.11", ""},
		{"2.53.0", "3.11.7", "2.53.0", "3.11.7", ""},
		{"2.53.0", "3.11.7", "2.53.0", "3", ""},
		{"3.0.0.dev0", "3.12.0", "", "", ""},
		{"2.52.0rc1", "3.12.0", "", "", ""},
		{"2.51.2", "3.11.7", "", "", "older"},
		{"2.9.3", "3.11.7", "", "", "older"},
		{"1.99.0", "3.11.7", "", "", "older"},
		{"2", "3.11.7", "", "", "older"},
		{"", "3.11.7", "", "", "unknown"},
		{"0.0.0+fakeray", "3.11.7", "", "", "older"},
		{"2.54.0", "3.11.7", "2.53.0", "", "ray.version"},
		{"2.53.0", "3.12.1", "", "3.11", "python_version"},
		{"2.53.0", "3.11.6", "", "3.11.7", "python_version"},
		{"2.53.0", "3.11", "", "3.11.7", "python_version"}, // fewer parts than the config's
		{"2.53.0", "", "", "3.11", "python_version"},
		{"2.53.0", "3.1.0", "", "3.11", "python_version"}, // numbers, not prefixes
	} {
		got := rayversion.Problem(c.ray, c.py, c.wantRay, c.wantPy)
		if c.bad == "" && got != "" || c.bad != "" && !strings.Contains(got, c.bad) {
			t.Errorf("rayversion.Problem(%q, %q, %q, %q) = %q, want %q", c.ray, c.py, c.wantRay, c.wantPy, got, c.bad)
		}
	}
}

// TestDecisionOrderRayRules: a request failing two steps is judged by the
// earlier one, as docs/protocol.md §6 orders them (5, 6, 6a, 7, 7a, 8).
func TestDecisionOrderRayRules(t *testing.T) {
	h := newHead(t)
	wrongModel := func(r *wire.EnrollRequest) { r.GPUModels = []string{"NVIDIA H100", "NVIDIA H100"} }
	badEgress := func(r *wire.EnrollRequest) { r.Checks.Egress.OK = false }
	oldRay := func(r *wire.EnrollRequest) { r.RayVersion = "2.40.0" }
	for i, c := range []struct {
		name, nodeType string
		mode           fakeagent.Mode
		muts           []func(*wire.EnrollRequest)
		neighbour      bool // a live node on the same IP
		want           string
	}{
		{"gpu count before gpu model", "a100", fakeagent.Answer, []func(*wire.EnrollRequest){wrongModel, func(r *wire.EnrollRequest) { r.GPUs = 1 }}, false, wire.ReasonGPUCount},
		{"gpu model before egress", "a100", fakeagent.Answer, []func(*wire.EnrollRequest){wrongModel, badEgress}, false, wire.ReasonGPUModel},
		{"egress before ray version", "gpu1", fakeagent.Answer, []func(*wire.EnrollRequest){badEgress, oldRay}, false, wire.ReasonEgress},
		{"ray version before port check", "gpu1", fakeagent.Silent, []func(*wire.EnrollRequest){oldRay}, false, wire.ReasonRayVersion},
		{"port check before shared ip", "gpu1", fakeagent.Wrong, nil, true, wire.ReasonPortCheck},
		{"shared ip before no slot", "tiny", fakeagent.Answer, nil, true, wire.ReasonSharedIP},
	} {
		t.Run(c.name, func(t *testing.T) {
			ip := fmt.Sprintf("127.0.3.%d", i+1)
			if c.nodeType == "tiny" { // tiny's one slot taken elsewhere: the row fails 8 too
				_, tok, a := h.candidate(t, "order-tiny", "127.0.3.100", "tiny", fakeagent.Answer)
				if st, body := h.post(t, "127.0.3.100", a.Request("order-tiny", tok.Reveal(), 0)); st != 200 {
					t.Fatalf("tiny slot: %d %s", st, body)
				}
			}
			if c.neighbour {
				inst := fmt.Sprintf("order-n%d", i)
				_, tok, a := h.candidate(t, inst, ip, "gpu1", fakeagent.Answer)
				if st, body := h.post(t, ip, a.Request(inst, tok.Reveal(), 1)); st != 200 {
					t.Fatalf("neighbour: %d %s", st, body)
				}
			}
			inst := fmt.Sprintf("order-%d", i)
			_, tok, a := h.candidate(t, inst, ip, c.nodeType, c.mode)
			req := a.Request(inst, tok.Reveal(), nodeTypes[c.nodeType].GPUs)
			for _, m := range c.muts {
				m(&req)
			}
			st, body := h.post(t, ip, req)
			if want := fmt.Sprintf(`{"error":"rejected","reason":%q}`, c.want); st != 403 || body != want {
				t.Errorf("got %d %s, want 403 %s", st, body, want)
			}
		})
	}
}

// TestSharedIPConcurrent: candidates behind one public IP enrolling at
// once: exactly one becomes a node, the rest are shared_ip.
func TestSharedIPConcurrent(t *testing.T) {
	h := newHead(t)
	const n, ip = 4, "127.0.4.1"
	type cand struct {
		req wire.EnrollRequest
	}
	var cs []cand
	for i := range n {
		inst := fmt.Sprintf("share-%d", i)
		_, tok, a := h.candidate(t, inst, ip, "gpu1", fakeagent.Answer)
		cs = append(cs, cand{a.Request(inst, tok.Reveal(), 1)})
	}
	bodies := make(chan string, n)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b, err := fakeagent.Post(context.Background(), fakeagent.Client(ip, h.ca.Pool(), nil), h.url+"/enroll", c.req)
			if err != nil {
				t.Error(err)
			}
			bodies <- fmt.Sprint(st, " ", strings.Contains(string(b), `"reason":"shared_ip"`))
		}()
	}
	wg.Wait()
	close(bodies)
	got := map[string]int{}
	for b := range bodies {
		got[b]++
	}
	if got["200 false"] != 1 || got["403 true"] != n-1 {
		t.Errorf("outcomes %v, want one 200 and %d shared_ip", got, n-1)
	}
	for id, reason := range h.destroyed {
		if reason != wire.ReasonSharedIP {
			t.Errorf("%s destroyed for %s", id, reason)
		}
	}
	if len(h.block.Entries()) != 0 {
		t.Errorf("shared_ip blocklisted a host: %v", h.block.Entries())
	}
}

// TestRayVersionLogged: the refusal names what the image runs and what
// the cluster needs, so the operator can fix the image.
func TestRayVersionLogged(t *testing.T) {
	h := newHead(t)
	_, tok, a := h.candidate(t, "inst-rv", "127.0.5.1", "gpu1", fakeagent.Answer)
	req := a.Request("inst-rv", tok.Reveal(), 1)
	req.RayVersion = "2.49.1"
	if st, body := h.post(t, "127.0.5.1", req); st != 403 || !strings.Contains(body, wire.ReasonRayVersion) {
		t.Fatalf("got %d %s", st, body)
	}
	logs := h.logs.String()
	for _, want := range []string{"fix the node image", "ray_version=2.49.1", "want_ray_version=2.53.0", "older than 2.52"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}
