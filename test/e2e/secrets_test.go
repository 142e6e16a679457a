package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretSet is every secret value the test knows, by a name for messages.
type secretSet map[string]string

// add records a secret and, for PEM, each long line of its body (a leak of
// part of a key is a leak).
func (s secretSet) add(name, v string) {
	v = strings.TrimSpace(v)
	if len(v) < 16 {
		return
	}
	s[name] = v
	if strings.HasPrefix(v, "-----BEGIN") {
		for i, l := range strings.Split(v, "\n") {
			if len(l) >= 40 && !strings.HasPrefix(l, "-----") {
				s[name+"#"+string(rune('a'+i%26))+string(rune('0'+i/26))] = l
			}
		}
	}
}

// headSecrets reads the head state dir's secrets: every 0600 file, and the
// string values of JSON ones (cluster token, app root key).
func headSecrets(t *testing.T, state string, s secretSet) {
	t.Helper()
	ents, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(state, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		addFile(s, "head:"+e.Name(), b)
	}
}

// nodeSecrets reads the agent's private state dir out of a container: every
// file readable only by its owner (keys, tokens).
func nodeSecrets(t *testing.T, id string, s secretSet) {
	t.Helper()
	files, err := suite.eng.CopyFrom(context.Background(), id, "/run/rayvast")
	if err != nil {
		t.Fatalf("copy the agent's state out of %s: %v", id, err)
	}
	n := 0
	for name, f := range files {
		if f.Mode&0o077 == 0 {
			addFile(s, "node "+id+":"+name, f.Data)
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no private file in %s:/run/rayvast (%d files): the agent wrote no bundle?", id, len(files))
	}
}

// addFile adds a private file: a JSON file by its secret-named string
// fields (tokens, keys; not paths, not IDs or certificates), else whole.
func addFile(s secretSet, name string, b []byte) {
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		for k, v := range m {
			str, ok := v.(string)
			secretName := strings.Contains(k, "token") || strings.Contains(k, "key") || strings.Contains(k, "secret")
			if ok && secretName && !strings.HasPrefix(str, "/") {
				s.add(name+"."+k, str)
			}
		}
		return
	}
	if bytes.Contains(b, []byte("-----BEGIN CERTIFICATE")) && !bytes.Contains(b, []byte("PRIVATE KEY")) {
		return // a certificate is public
	}
	s.add(name, string(b))
}

// leaks returns the names of secrets found in text.
func (s secretSet) leaks(text []byte) []string {
	var out []string
	for name, v := range s {
		if bytes.Contains(text, []byte(v)) {
			out = append(out, name)
		}
	}
	return out
}

// fakerayRecord reads the stand-in Ray's record (argv, env, …) out of a
// container.
func fakerayRecord(t *testing.T, id string) map[string]any {
	t.Helper()
	files, err := suite.eng.CopyFrom(context.Background(), id, "/tmp/fakeray-record.json")
	if err != nil {
		t.Fatalf("read the stand-in Ray's record in %s: %v", id, err)
	}
	var rec map[string]any
	if err := json.Unmarshal(files["fakeray-record.json"].Data, &rec); err != nil {
		t.Fatalf("record in %s: %v", id, err)
	}
	return rec
}
