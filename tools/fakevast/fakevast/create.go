package fakevast

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// maxOpenPorts is vast's limit of open ports per instance, the image's
// EXPOSE ports included (README: networking).
const maxOpenPorts = 64

// createBody is what the fake reads of PUT /api/v0/asks/{id}/ (the CLI's
// create instance body). "entrypoint" is read only to be ignored.
type createBody struct {
	ClientID    string            `json:"client_id"`
	Image       string            `json:"image"`
	Label       string            `json:"label"`
	Disk        float64           `json:"disk"`
	Runtype     string            `json:"runtype"`
	Env         map[string]string `json:"env"`
	Onstart     string            `json:"onstart"`
	Entrypoint  string            `json:"entrypoint"`
	Args        []string          `json:"args"`
	ArgsStr     string            `json:"args_str"`
	TargetState string            `json:"target_state"`
	Cancel      *bool             `json:"cancel_unavail"`
	Price       *float64          `json:"price"` // a bid (the CLI's --bid_price)
}

// cancels says whether a create that cannot start at once (a machine that
// starts instances stopped, a bid below min_bid) is refused 410 rather
// than made a stopped instance: cancel_unavail as sent, else its
// documented default, true for on-demand with target_state "running" and
// false for an interruptible (create_instance.yaml; vast.py's
// --cancel-unavail: "Return error if scheduling fails (rather than
// creating a stopped instance)").
func (b createBody) cancels() bool {
	if b.Cancel != nil {
		return *b.Cancel
	}
	return b.Price == nil && b.TargetState == "running"
}

// check applies create's documented field limits (README: create_instance
// x-input-validation); "" when the body passes.
func (b createBody) check() string {
	cmd := len(b.Onstart) + len(b.ArgsStr) + len(strings.Join(b.Args, " "))
	total := 0
	for k, v := range b.Env {
		if len(v) > 256 {
			return fmt.Sprintf("env %s: value longer than 256 characters", k)
		}
		total += len(k) + len(v)
	}
	switch {
	case b.Image == "":
		return "image is required"
	case len(b.Image) > 1024:
		return "image: longer than 1024 characters"
	case len(b.Label) > 256:
		return "label: longer than 256 characters"
	case cmd > 4096:
		return fmt.Sprintf("args, args_str and onstart: %d characters, at most 4096", cmd)
	case total > 32768:
		return "env: longer than 32768 characters in all"
	case b.Disk != 0 && b.Disk < 8:
		return "disk: at least 8 GB"
	}
	return ""
}

// entrypoint is what the container runs in place of the image's
// ENTRYPOINT: in runtype "args", onstart (one path, as the CLI's
// --entrypoint /bin/sh sends it); otherwise the image's own.
func (b createBody) entrypoint() string {
	if b.Runtype == "args" {
		return strings.TrimSpace(b.Onstart)
	}
	return ""
}

// askedPorts counts the env's "-p N:N" requests for vast's identity ports
// (N ≥ 70000, inside = outside).
func askedPorts(env map[string]string) int {
	n := 0
	for k := range env {
		spec, ok := strings.CutPrefix(k, "-p ")
		if !ok {
			continue
		}
		in, out, ok := strings.Cut(spec, ":")
		a, err := strconv.Atoi(in)
		if ok && in == out && err == nil && a >= wire.VastPortBase && a < wire.VastPortBase+wire.PortCount {
			n++
		}
	}
	return n
}

// exited asks the backend whether the instance's process ended; the caller
// holds s.mu.
func (s *Server) exited(id int64) bool {
	ew, ok := s.cfg.Backend.(ExitWatcher)
	return ok && ew.Exited(id)
}
