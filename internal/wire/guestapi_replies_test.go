package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guestSamples are the guest API replies, pinned to testdata/guest_NAME.json.
func guestSamples() map[string]any {
	return map[string]any{
		"guest_version": GuestVersion{Version: "dev", Protocol: Version},
		"guest_health":  GuestHealth{Status: GuestHealthOK},
		"guest_info": GuestInfo{AppID: "app", InstanceID: "12345", AppPublicKey: "ab", PublicTCBInfo: true,
			TCB: &GuestTCB{Checks: &CheckReport{Checks: Checks{Capabilities: Check{OK: true}}, GPUs: 1}, AgentSHA256: "cd"}},
		"guest_attestation":    AppKeyAttestation{AppID: "app", InstanceID: "12345", AppPublicKey: "ab", Message: "m", Signature: "c2ln", CertChain: "PEM"},
		"guest_getkey_request": GetKeyRequest{Path: "my/key", Algorithm: "ed25519"},
		"guest_getkey_reply":   GetKeyReply{Key: "00", PublicKey: "ab"},
	}
}

func newGuestReply(v any) any {
	switch v.(type) {
	case GuestVersion:
		return new(GuestVersion)
	case GuestHealth:
		return new(GuestHealth)
	case GuestInfo:
		return new(GuestInfo)
	case AppKeyAttestation:
		return new(AppKeyAttestation)
	case GetKeyRequest:
		return new(GetKeyRequest)
	case GetKeyReply:
		return new(GetKeyReply)
	}
	panic(fmt.Sprintf("no type for %T", v))
}

// TestGuestGolden pins each guest API reply shape and proves its golden file
// decodes strictly back (no unknown field).
func TestGuestGolden(t *testing.T) {
	for name, v := range guestSamples() {
		t.Run(name, func(t *testing.T) {
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
			if err := Decode(bytes.NewReader(want), MaxBody, newGuestReply(v)); err != nil {
				t.Errorf("golden file does not decode strictly: %v", err)
			}
		})
	}
}

// TestGetKeyReplyRedacts proves the derived key never shows in %v or slog.
func TestGetKeyReplyRedacts(t *testing.T) {
	r := GetKeyReply{Key: "5ec7e75ec7e7", PublicKey: "ab"}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "reply", r)
	for _, s := range []string{fmt.Sprintf("%v", r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), buf.String()} {
		if strings.Contains(s, r.Key) {
			t.Errorf("key leaked: %s", s)
		}
	}
}
