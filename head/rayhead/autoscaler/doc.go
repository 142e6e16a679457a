// Package autoscaler holds rayvast_autoscaler.py, a Ray autoscaler external
// node provider that maps Ray's NodeProvider calls to the head's admin API
// (docs/protocol.md §8), example.yaml (a complete Ray cluster config for it, like the one
// `head up` writes) and check_config.py (a config checked against Ray's own
// testdata/ray-schema.json and the keys Ray's v1 autoscaler indexes). The
// plugin is embedded (Plugin) so `head up` can put it on the Ray head's
// PYTHONPATH, and ClusterConfig is the config `head up` writes for it
// (Write: STATE/autoscaler.yaml and the plugin). The Go tests run the Python tests so `go test ./...` covers
// them: against a stub of Ray, against a real `head serve`, under real
// Ray's Python, and with Ray's real autoscaler (the monitor of a real Ray
// head) driving the plugin.
package autoscaler
