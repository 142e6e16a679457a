package envconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rayvast/rayvast/internal/secret"
)

// EnvSecretsFD names the descriptor through which Reexec hands the secrets
// to the new image. It holds a number, never a secret, and as a RAYVAST_*
// name it never reaches Ray.
const EnvSecretsFD = "RAYVAST_SECRETS_FD"

// maxHandover bounds the handed-over secrets: under one page, so the
// whole write fits in any pipe's buffer before anyone reads it.
const maxHandover = 3 << 10

// encodeHandover is the pipe's content: {"NAME":"value",…}.
func encodeHandover(s Secrets) ([]byte, error) {
	m := make(map[string]string, len(s))
	for name, v := range s {
		m[name] = v.Reveal()
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > maxHandover {
		return nil, fmt.Errorf("secrets are %d bytes, over %d", len(b), maxHandover)
	}
	return b, nil
}

// decodeHandover accepts only the names of SecretVars.
func decodeHandover(b []byte, s Secrets) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return errors.New("not a JSON object of strings")
	}
	for name, v := range m {
		if !isSecretVar(name) {
			return fmt.Errorf("unexpected name %q", name)
		}
		s[name] = secret.New(v)
	}
	return nil
}

// withoutCopies drops every variable whose value holds one of the secrets
// (secret.Holds): a copy under another name (E2E_COPY_OF_TOKEN, "Bearer
// <key>") would leak through the new block just the same.
func withoutCopies(env []string, s Secrets) []string {
	forms := make([]string, 0, len(s))
	for _, sec := range s {
		forms = append(forms, sec.Reveal())
	}
	var out []string
	for _, kv := range env {
		if _, v, _ := strings.Cut(kv, "="); !secret.Holds(v, forms) {
			out = append(out, kv)
		}
	}
	return out
}

func isSecretVar(name string) bool {
	for _, n := range SecretVars {
		if n == name {
			return true
		}
	}
	return false
}
