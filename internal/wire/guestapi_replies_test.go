package wire

import (
	"bytes"
	"fmt"
	"log/slog"
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

// TestGuestGolden pins each guest API reply shape and proves its golden file
// decodes strictly back (no unknown field).
func TestGuestGolden(t *testing.T) {
	for name, v := range guestSamples() {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, v) })
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
