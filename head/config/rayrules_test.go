package config

import (
	"strings"
	"testing"
)

// TestRayRules: what Ray itself would refuse, or what no node could
// meet, is refused at config time with the field and the reason.
func TestRayRules(t *testing.T) {
	const nt = `"gpu1":{"gpus":1,"max_workers":2,"resources":{"a100":1},"labels":{"zone":"x"}}`
	for _, c := range []struct {
		name, from, to string
		want           string // "" = accepted
	}{
		{"ray version", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","version":"2.53.0","python_version":"3.11"`, ""},
		{"ray nightly", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","version":"3.0.0.dev0"`, ""},
		{"ray too old", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","version":"2.51.0"`, "older than 2.52"},
		{"ray two parts", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","version":"2.53"`, "ray.version"},
		{"ray garbage", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","version":"latest"`, "ray.version"},
		{"python patch", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","python_version":"3.11.7"`, ""},
		{"python major", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","python_version":"3"`, ""},
		{"python four parts", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","python_version":"3.11.7.1"`, "ray.python_version"},
		{"head resources", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","head_resources":{"CPU":2,"GPU":1,"head":1}`, ""},
		{"head resources fractional", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","head_resources":{"CPU":0.5}`, "ray.head_resources.CPU: 0.5"},
		{"head resources negative", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","head_resources":{"GPU":-1}`, "ray.head_resources.GPU"},
		{"head resources memory", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","head_resources":{"memory":1}`, "ray.head_resources.memory"},
		{"head resources odd name", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","head_resources":{"a b":1}`, "resource name"},
		{"python words", `"head_address":"198.51.100.1:6379"`, `"head_address":"198.51.100.1:6379","python_version":"py3.11"`, "ray.python_version"},
		{"fractional resource", `"a100":1`, `"a100":0.5`, "resources.a100: 0.5 is not a whole number"},
		{"whole float resource", `"a100":1`, `"a100":2.0`, ""},
		{"huge resource", `"a100":1`, `"a100":1e15`, "maximum"},
		{"CPU as a resource", `"a100":1`, `"CPU":4`, "Ray's own resources"},
		{"GPU as a resource", `"a100":1`, `"GPU":1`, "Ray's own resources"},
		{"memory as a resource", `"a100":1`, `"memory":1`, "Ray's own resources"},
		{"ray.io label", `"zone":"x"`, `"ray.io/node-type":"x"`, "ray.io/ prefix is reserved"},
		{"prefixed label", `"zone":"x"`, `"example.com/zone":"eu-1"`, ""},
		{"bad label key", `"zone":"x"`, `"-zone":"x"`, "key \"-zone\""},
		{"bad label prefix", `"zone":"x"`, `"a$b/zone":"x"`, "prefix"},
		{"bad label value", `"zone":"x"`, `"zone":"eu west"`, "value of \"zone\""},
		{"empty label value", `"zone":"x"`, `"zone":""`, ""},
		{"cpus", `"gpus":1,`, `"gpus":1,"cpus":16,`, ""},
		{"cpus at the port bound", `"gpus":1,`, `"gpus":1,"cpus":53,`, ""},
		{"cpus above the worker ports", `"gpus":1,`, `"gpus":1,"cpus":54,`, "worker ports"},
		{"negative cpus", `"gpus":1,`, `"gpus":1,"cpus":-1,`, "cpus"},
		{"gpu model", `"gpus":1,`, `"gpus":1,"gpu_model":"RTX 4090",`, ""},
		{"gpu model only NVIDIA", `"gpus":1,`, `"gpus":1,"gpu_model":"NVIDIA -",`, "names no model"},
		{"gpu model control char", `"gpus":1,`, `"gpus":1,"gpu_model":"A100\u001b",`, "control"},
		{"gpu model without gpus", `"gpus":1,`, `"gpus":0,"gpu_model":"A100",`, "gpus is 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(good, c.from, c.to, 1)
			if src == good || !strings.Contains(good, nt) {
				t.Fatalf("test did not change the config")
			}
			_, err := Parse(strings.NewReader(src))
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
