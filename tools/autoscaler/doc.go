// Package autoscaler holds rayvast_autoscaler.py, a Ray autoscaler external
// node provider that maps Ray's NodeProvider calls to the head's admin API
// (SPEC §8). The Go test runs its Python unit tests so `go test ./...` covers
// it.
package autoscaler
