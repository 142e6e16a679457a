package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	tok  = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // 43 chars
	pkey = "c2VjcmV0LXBvcnQta2V5LTMyLWJ5dGVzLWxvbmchISE="
)

func ports() []int {
	p := make([]int, PortCount)
	for i := range p {
		p[i] = VastPortBase + i - 10000 // 60000…60063, in range
	}
	return p
}

func samples() map[string]any {
	code := 0
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rel, cuda, yes := 0.98, 12.4, true
	return map[string]any{
		"enroll_request": EnrollRequest{Version: 2, InstanceID: "12345", JoinToken: tok,
			Checks: Checks{Egress: EgressCheck{OK: true, IP: "203.0.113.7"}}, GPUs: 1, GPUModels: []string{"NVIDIA A100-SXM4-80GB"}, RayVersion: "2.53.0", PythonVersion: "3.11.7", Ports: ports()[:3], PortKey: pkey},
		"enroll_response": EnrollResponse{Version: 2, NodeCert: "PEM", NodeKey: "PEM", CACert: "PEM",
			ClusterToken: "ct", AppID: "app", AppRootKey: "key", CandidateID: "c1", NodeType: "gpu1",
			Ray: RayParams{HeadAddress: "198.51.100.1:6379", NodeIPAddress: "203.0.113.7", NodeName: "12345", NodeManagerPort: 60000,
				WorkerPorts: []int{60010, 60011}, NumGPUs: 1, NumCPUs: 1, Resources: map[string]float64{"a100": 1}, Labels: map[string]string{"zone": "x"}},
			GuestAPI:  GuestAPIGrant{Port: 60063, GuestAPIPolicy: GuestAPIPolicy{AnonymousScopes: []string{"guest:health"}, ExternalIssuers: []Issuer{{Name: "ops", PublicKeys: []string{"ab"}}}}},
			Heartbeat: HeartbeatParams{Port: 8444, IntervalS: 30}},
		"error_refused":     ErrorBody{Error: ErrRefused},
		"error_rejected":    ErrorBody{Error: ErrRejected, Reason: ReasonPortCheck},
		"heartbeat":         Heartbeat{Version: 2, InstanceID: "12345", Seq: 7, Ray: RayStatus{State: RayExited, PID: 42, ExitCode: &code}, HealthToken: "h.t.s"},
		"heartbeat_reply":   HeartbeatReply{IntervalS: 30, Action: ActionNone, RayHead: &RayHeadRun{ID: "5d2f0a9c41b7e803"}, Drain: &DrainNotice{Deadline: t0}},
		"report":            Report{Version: 2, InstanceID: "12345", Event: EventRayExited, Detail: "exit 0"},
		"candidate_request": CandidateRequest{NodeType: "gpu1", InstanceID: "12345", PublicIP: "203.0.113.7"},
		"candidate_created": CandidateCreated{CandidateID: "c1", JoinToken: tok, Env: map[string]string{EnvJoinToken: tok}},
		"candidate":         Candidate{CandidateID: "c1", NodeType: "gpu1", State: StateRunning, CreatedAt: t0, UpdatedAt: t0},
		"node":              Node{InstanceID: "12345", CandidateID: "c1", NodeType: "gpu1", PublicIP: "203.0.113.7", State: StateEnrolled, Serial: "0a", EnrolledAt: t0, LastHeartbeat: &t0, Health: HealthHealthy},
		"block_entry":       BlockEntry{HostID: "h1", Class: BlockSecurity, Reason: ReasonSecurityCheck, Until: t0},
		"config": Config{Cluster: "c", Ray: RayHead{HeadAddress: "198.51.100.1:6379", Version: "2.53.0", PythonVersion: "3.11"},
			NodeTypes: map[string]NodeType{"gpu1": {GPUs: 1, GPUModel: "A100", CPUs: 8, MaxWorkers: 2, Resources: map[string]float64{}, Labels: map[string]string{}}},
			GuestAPI:  GuestAPIPolicy{AnonymousScopes: []string{}, ExternalIssuers: []Issuer{}},
			Provider: &ProviderConfig{Kind: "vast", Image: "rayproject/ray:2.53.0-gpu",
				OfferFilters: OfferFilters{Reliability2: &rel, Datacenter: &yes, Geolocation: []string{"US"}, Search: map[string]map[string]any{"gpu_ram": {"gte": 24000.0}}},
				NodeTypes:    map[string]OfferSpec{"gpu1": {GPUName: "RTX 4090", MaxDPH: 0.5, OfferFilters: OfferFilters{CUDAMaxGood: &cuda}}}}, MaxDPHTotal: 2,
			Autoscaler: &AutoscalerConfig{IdleTimeoutMinutes: 5}},
		"provider_status": ProviderStatus{Kind: "vast", Halted: "search_quota_exceeded", Detail: "vast's daily search quota is used up", Until: &t0},
		"app_file":        AppFile{AppID: "app", AppRootKey: "key", PublicTCBInfo: true},
		"sys_config":      SysConfig{GuestAgentAPI: &GuestAPIPolicy{AnonymousScopes: []string{"guest:version"}}},
	}
}

// TestGolden pins every wire shape to testdata/NAME.json, and proves each
// golden file decodes strictly back into its type (no unknown field).
func TestGolden(t *testing.T) {
	for name, v := range samples() {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, v) })
	}
}

// checkGolden compares v's JSON with testdata/NAME.json (rewritten with
// -update) and decodes the file strictly into a new value of v's type.
func checkGolden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("wire shape changed:\ngot  %s\nwant %s", got, want)
	}
	ptr := reflect.New(reflect.TypeOf(v)).Interface()
	if err := Decode(bytes.NewReader(want), MaxBody, ptr); err != nil {
		t.Errorf("golden file does not decode strictly: %v", err)
	}
}

// TestRefusedBytes pins the exact bytes every pre-token refusal must carry.
func TestRefusedBytes(t *testing.T) {
	b, _ := json.Marshal(ErrorBody{Error: ErrRefused})
	if string(b) != `{"error":"refused"}` {
		t.Errorf("got %s", b)
	}
}

func TestDecodeStrict(t *testing.T) {
	for _, c := range []struct {
		name, body string
		ok         bool
	}{
		{"ok", `{"version":2}`, true},
		{"ok trailing space", "{\"version\":1}\n  ", true},
		{"unknown field", `{"version":2,"x":2}`, false},
		{"wrong type", `{"version":"1"}`, false},
		{"trailing data", `{"version":2}{}`, false},
		{"truncated", `{"version":`, false},
		{"garbage", `nope`, false},
		{"empty", ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Report
			err := Decode(strings.NewReader(c.body), MaxBody, &r)
			if (err == nil) != c.ok {
				t.Errorf("Decode(%q) err = %v, want ok=%v", c.body, err, c.ok)
			}
		})
	}
	big := `{"detail":"` + strings.Repeat("a", MaxBody) + `"}`
	var r Report
	if err := Decode(strings.NewReader(big), MaxBody, &r); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversize body: err = %v, want ErrTooLarge", err)
	}
}

// TestDecodeTolerant proves the agent's reading of a head's answer keeps
// what it knows and skips a field a later head added, while wrong types,
// trailing data and oversize bodies stay errors.
func TestDecodeTolerant(t *testing.T) {
	var r HeartbeatReply
	body := `{"interval_s":30,"action":"none","later_field":{"x":[1,2]},"drain":{"deadline":"2026-12-07T15:00:00Z"}}`
	if err := DecodeTolerant(strings.NewReader(body), MaxBody, &r); err != nil || r.IntervalS != 30 || r.Drain == nil || r.Drain.Deadline.Hour() != 15 {
		t.Errorf("DecodeTolerant(%s) = %+v, %v; want interval 30 and the drain, the unknown field skipped", body, r, err)
	}
	if err := Decode(strings.NewReader(body), MaxBody, &r); err == nil {
		t.Error("strict Decode took an unknown field")
	}
	for _, bad := range []string{`{"interval_s":"30"}`, `{"interval_s":30}{}`, `{"x":"` + strings.Repeat("a", MaxBody) + `"}`} {
		if err := DecodeTolerant(strings.NewReader(bad), MaxBody, &r); err == nil {
			t.Errorf("DecodeTolerant took %.40q", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	good := func() EnrollRequest {
		return EnrollRequest{Version: 2, InstanceID: "i-1", JoinToken: tok, Ports: ports(), PortKey: pkey}
	}
	if r := good(); r.Validate() != nil {
		t.Fatalf("good request refused: %v", r.Validate())
	}
	for name, mut := range map[string]func(*EnrollRequest){
		"version 1":        func(r *EnrollRequest) { r.Version = 1 },
		"version 3":        func(r *EnrollRequest) { r.Version = 3 },
		"65 gpu models":    func(r *EnrollRequest) { r.GPUModels = make([]string, 65) },
		"long gpu model":   func(r *EnrollRequest) { r.GPUModels = []string{strings.Repeat("x", 129)} },
		"long ray version": func(r *EnrollRequest) { r.RayVersion = strings.Repeat("9", 65) },
		"empty id":         func(r *EnrollRequest) { r.InstanceID = "" },
		"id 65 chars":      func(r *EnrollRequest) { r.InstanceID = strings.Repeat("a", 65) },
		"id with slash":    func(r *EnrollRequest) { r.InstanceID = "a/b" },
		"short token":      func(r *EnrollRequest) { r.JoinToken = "abc" },
		"63 ports":         func(r *EnrollRequest) { r.Ports = r.Ports[:63] },
		"65 ports":         func(r *EnrollRequest) { r.Ports = append(r.Ports, 1) },
		"duplicate port":   func(r *EnrollRequest) { r.Ports[5] = r.Ports[6] },
		"port 0":           func(r *EnrollRequest) { r.Ports[0] = 0 },
		"port 65536":       func(r *EnrollRequest) { r.Ports[0] = 65536 },
		"port key short":   func(r *EnrollRequest) { r.PortKey = "AAAA" },
		"port key garbage": func(r *EnrollRequest) { r.PortKey = "!!" },
		"negative gpus":    func(r *EnrollRequest) { r.GPUs = -1 },
	} {
		r := good()
		mut(&r)
		err := r.Validate()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), pkey) {
			t.Errorf("%s: error quotes a secret: %v", name, err)
		}
	}
}

// TestSecretCarriersRedact proves %v, %+v, %#v and slog never show the
// secrets the wire types carry.
func TestSecretCarriersRedact(t *testing.T) {
	secrets := []string{tok, pkey, "ct", "key", "h.t.s"}
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	for name, v := range samples() {
		switch v.(type) {
		case EnrollRequest, EnrollResponse, CandidateCreated, Heartbeat, AppFile:
		default:
			continue
		}
		lg.Info("x", "v", v)
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets[:2] {
				if strings.Contains(out, s) {
					t.Errorf("%s %s leaks: %s", name, verb, out)
				}
			}
		}
	}
	for _, s := range []string{tok, pkey, `"ct"`, "h.t.s"} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("log leaks %q: %s", s, logs.String())
		}
	}
}
