// Package envconfig reads and validates the agent's environment (docs/protocol.md §2),
// and keeps its secrets out of reach: TakeSecrets is the one place that
// reads them out of the real environment and unsets them, and Reexec
// (reexec*.go) re-executes the agent without them in its environ block,
// handing them over through a pipe; Undumpable makes the process
// non-dumpable so Ray's processes, same uid, cannot read its memory or
// /proc/PID/environ.
//
// Parsing is kept apart from the process environment: Parse takes a lookup
// function, so tests never touch os.Environ.
package envconfig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// DefaultState is the agent's private state dir when RAYVAST_STATE is unset.
const DefaultState = "/run/rayvast"

// DefaultPython is used when RAYVAST_PYTHON is unset (bootloader.sh sets it).
const DefaultPython = "python3"

// SecretVars are the variables that hold secrets: read once, then unset.
var SecretVars = []string{wire.EnvJoinToken, wire.EnvVastAPIKey}

// Config is the validated environment of an enrolling agent.
type Config struct {
	Head            netip.Addr // head IP literal
	PortA, PortB    int
	BootstrapSHA256 string // lowercase hex
	CASHA256        string // lowercase hex, of the CA certificate's DER
	JoinToken       secret.String
	ContainerAPIKey secret.String // vast's: scrubbed from Ray's env; ends this instance when the head is gone (agent/selfend)
	VastContainerID string        // CONTAINER_ID: the instance ContainerAPIKey may end
	VastURL         string        // RAYVAST_VAST_URL; "" = vast's own
	InstanceID      string
	PublicIP        netip.Addr
	Ports           []int  // 64 distinct ports, inside = outside
	EgressResolvers string // raw `kind@ip:port` list; "" = public resolvers
	PublicLogs      bool
	PublicSysinfo   bool
	PublicTCBInfo   bool
	Python          string
	State           string
	Restart         Restart // Ray's restart policy knobs
}

// Secrets are the environment's secrets, for scrubbing copies of them out
// of what the agent hands on (secret.Holds).
func (c Config) Secrets() []secret.Former {
	return []secret.Former{c.JoinToken, c.ContainerAPIKey}
}

// Restart holds the restart policy knobs; a zero field means the agent's
// default (MaxRestarts is -1 when unset: 0 is a valid "never restart").
type Restart struct {
	MaxRestarts int
	Window      time.Duration
	Delay       time.Duration
}

// Secrets are the secret variables taken out of an environment.
type Secrets map[string]secret.String

// TakeSecrets copies every secret variable out of the process environment
// and unsets it at once, so nothing started later (Ray, a shell) inherits it.
// inEnviron says some came from the environment the process was exec'd
// with: the kernel still shows that block at /proc/PID/environ, so the
// caller should Reexec. Secrets handed over by a Reexec are read from its
// pipe; err is a failure to read them.
func TakeSecrets() (s Secrets, inEnviron bool, err error) {
	s = Secrets{}
	if fd, ok := os.LookupEnv(EnvSecretsFD); ok {
		os.Unsetenv(EnvSecretsFD)
		if err = readHandover(fd, s); err != nil {
			err = fmt.Errorf("secrets from re-exec: %w", err)
		}
	}
	for _, name := range SecretVars {
		if v, ok := os.LookupEnv(name); ok {
			s[name] = secret.New(v)
			os.Unsetenv(name)
			inEnviron = true
		}
	}
	return s, inEnviron, err
}

// Forms lists every form of every taken secret, for secret.Holds: what a
// command that parses no Config (agent check) scrubs from Ray's env.
func (s Secrets) Forms() []string {
	var taken []secret.Former
	for _, name := range SecretVars {
		if v, ok := s[name]; ok {
			taken = append(taken, v)
		}
	}
	return secret.AllForms(taken...)
}

// Lookup returns a lookup that answers secret names from s and all other
// names from env (os.LookupEnv in production).
func (s Secrets) Lookup(env func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := s[name]; ok {
			return v.Reveal(), true
		}
		if isSecretVar(name) {
			return "", false
		}
		return env(name)
	}
}

// Parse reads and validates every variable of docs/protocol.md §2 through lookup. The
// error lists every bad variable by name; secret values are never quoted.
func Parse(lookup func(string) (string, bool)) (Config, error) {
	p := parser{lookup: lookup}
	var c Config
	c.Head = p.ip(wire.EnvHead)
	c.PortA = p.port(wire.EnvPortA)
	c.PortB = p.port(wire.EnvPortB)
	c.BootstrapSHA256 = p.sha256(wire.EnvBootstrapSHA256)
	c.CASHA256 = p.sha256(wire.EnvCASHA256)
	c.JoinToken = p.joinToken(wire.EnvJoinToken)
	if v, ok := lookup(wire.EnvVastAPIKey); ok {
		c.ContainerAPIKey = secret.New(v)
	}
	c.InstanceID = p.instanceID()
	c.VastContainerID, _ = lookup(wire.EnvVastContainerID)
	c.VastURL = p.httpURL(wire.EnvVastURL)
	c.PublicIP = p.publicIP()
	c.Ports = p.ports()
	c.EgressResolvers, _ = lookup(wire.EnvEgressResolvers)
	c.PublicLogs = p.flag(wire.EnvPublicLogs, false)
	c.PublicSysinfo = p.flag(wire.EnvPublicSysinfo, false)
	c.PublicTCBInfo = p.flag(wire.EnvPublicTCBInfo, true)
	c.Python = p.orDefault(wire.EnvPython, DefaultPython)
	c.State = p.orDefault(wire.EnvState, DefaultState)
	if !strings.HasPrefix(c.State, "/") {
		p.fail(wire.EnvState, "must be an absolute path")
	}
	c.Restart = Restart{MaxRestarts: p.count(wire.EnvRayMaxRestarts),
		Window: p.duration(wire.EnvRayRestartWindow), Delay: p.duration(wire.EnvRayRestartDelay)}
	return c, errors.Join(p.errs...)
}

type parser struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (p *parser) fail(name, why string) {
	p.errs = append(p.errs, fmt.Errorf("env %s: %s", name, why))
}

func (p *parser) required(name string) (string, bool) {
	v, ok := p.lookup(name)
	if !ok || v == "" {
		p.fail(name, "not set")
		return "", false
	}
	return v, true
}

func (p *parser) orDefault(name, def string) string {
	if v, ok := p.lookup(name); ok && v != "" {
		return v
	}
	return def
}

func (p *parser) ip(name string) netip.Addr {
	v, ok := p.required(name)
	if !ok {
		return netip.Addr{}
	}
	return p.parseIP(name, v)
}

func (p *parser) parseIP(name, v string) netip.Addr {
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" || a.IsUnspecified() {
		p.fail(name, fmt.Sprintf("want an IPv4 or IPv6 literal, got %q", clip(v)))
		return netip.Addr{}
	}
	return a.Unmap()
}

func (p *parser) port(name string) int {
	v, ok := p.required(name)
	if !ok {
		return 0
	}
	return p.parsePort(name, v)
}

func (p *parser) parsePort(name, v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 65535 {
		p.fail(name, fmt.Sprintf("want a port 1..65535, got %q", clip(v)))
		return 0
	}
	return n
}

func (p *parser) sha256(name string) string {
	v, ok := p.required(name)
	if !ok {
		return ""
	}
	if !isLowerHex(v, 64) {
		p.fail(name, fmt.Sprintf("want 64 lowercase hex characters, got %q", clip(v)))
		return ""
	}
	return v
}

func (p *parser) joinToken(name string) secret.String {
	v, ok := p.required(name)
	if !ok {
		return secret.String{}
	}
	// The value is secret: the message says what is wrong, never what it is.
	if len(v) != wire.JoinTokenLen {
		p.fail(name, fmt.Sprintf("want %d characters of base64url, got %d characters", wire.JoinTokenLen, len(v)))
		return secret.String{}
	}
	if b, err := base64.RawURLEncoding.DecodeString(v); err != nil || len(b) != 32 {
		p.fail(name, "not base64url (no padding) of 32 bytes")
		return secret.String{}
	}
	return secret.New(v)
}

func (p *parser) instanceID() string {
	name := wire.EnvInstanceID
	v, ok := p.lookup(name)
	if !ok || v == "" {
		name = wire.EnvVastContainerID
		v, ok = p.lookup(name)
	}
	if !ok || v == "" {
		p.fail(wire.EnvInstanceID, "not set (nor "+wire.EnvVastContainerID+")")
		return ""
	}
	if !wire.ValidInstanceID(v) {
		p.fail(name, fmt.Sprintf("want 1-64 of [A-Za-z0-9._-], got %q", clip(v)))
		return ""
	}
	return v
}

func (p *parser) publicIP() netip.Addr {
	name := wire.EnvPublicIP
	v, ok := p.lookup(name)
	if !ok || v == "" {
		name = wire.EnvVastPublicIP
		v, ok = p.lookup(name)
	}
	if !ok || v == "" {
		p.fail(wire.EnvPublicIP, "not set (nor "+wire.EnvVastPublicIP+")")
		return netip.Addr{}
	}
	return p.parseIP(name, v)
}

// ports reads RAYVAST_PORTS, else vast's VAST_TCP_PORT_70000…70063.
func (p *parser) ports() []int {
	var ports []int
	if v, ok := p.lookup(wire.EnvPorts); ok && v != "" {
		for _, f := range strings.Split(v, ",") {
			ports = append(ports, p.parsePort(wire.EnvPorts, f))
		}
		return p.checkPorts(wire.EnvPorts, ports)
	}
	missing := 0
	for i := 0; i < wire.PortCount; i++ {
		name := fmt.Sprintf("%s%d", wire.EnvVastPortPrefix, wire.VastPortBase+i)
		v, ok := p.lookup(name)
		if !ok || v == "" {
			missing++
			continue
		}
		ports = append(ports, p.parsePort(name, v))
	}
	if missing == wire.PortCount {
		p.fail(wire.EnvPorts, fmt.Sprintf("not set (nor %s%d…%d)", wire.EnvVastPortPrefix, wire.VastPortBase, wire.VastPortBase+wire.PortCount-1))
		return nil
	}
	return p.checkPorts(wire.EnvVastPortPrefix+"*", ports)
}

func (p *parser) checkPorts(name string, ports []int) []int {
	for _, n := range ports {
		if n == 0 {
			return nil // already reported
		}
	}
	if err := wire.ValidatePorts(ports); err != nil {
		p.fail(name, err.Error())
		return nil
	}
	return ports
}

func (p *parser) flag(name string, def bool) bool {
	v, ok := p.lookup(name)
	if !ok || v == "" {
		return def
	}
	switch v {
	case "0":
		return false
	case "1":
		return true
	}
	p.fail(name, fmt.Sprintf("want 0 or 1, got %q", clip(v)))
	return def
}

// count is a non-negative integer knob, -1 when unset.
func (p *parser) count(name string) int {
	v, ok := p.lookup(name)
	if !ok || v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1000 {
		p.fail(name, fmt.Sprintf("want an integer 0..1000, got %q", clip(v)))
		return -1
	}
	return n
}

// duration is a positive Go duration knob (at most a day), 0 when unset.
func (p *parser) duration(name string) time.Duration {
	v, ok := p.lookup(name)
	if !ok || v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > 24*time.Hour {
		p.fail(name, fmt.Sprintf("want a duration such as 30s or 10m (at most 24h), got %q", clip(v)))
		return 0
	}
	return d
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clip keeps a quoted bad value short: it is an operator's typo, not a secret,
// but a pasted blob should not flood the log.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// httpURL is an optional http(s) URL with a host.
func (p *parser) httpURL(name string) string {
	v, ok := p.lookup(name)
	if !ok || v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail(name, fmt.Sprintf("want an http(s) URL, got %q", clip(v)))
		return ""
	}
	return v
}
