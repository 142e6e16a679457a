package wire

import (
	"fmt"
	"log/slog"
)

// Replies of the guest API (docs/protocol.md §9). pRPC methods answer JSON bodies.

// GuestHealthOK is the status of a healthy GuestHealth.
const GuestHealthOK = "ok"

// GuestVersion answers Worker.Version.
type GuestVersion struct {
	Version  string `json:"version"`  // the agent's build version
	Protocol int    `json:"protocol"` // wire.Version
}

// GuestHealth answers Worker.Health (v1).
type GuestHealth struct {
	Status string `json:"status"`
}

// GuestInfo answers Worker.Info and fills the dashboard's identity block.
type GuestInfo struct {
	AppID         string    `json:"app_id"`
	InstanceID    string    `json:"instance_id"`    // from the node cert's URI SAN; "" without identity
	AppPublicKey  string    `json:"app_public_key"` // hex Ed25519: the key GetAttestationForAppKey attests
	PublicLogs    bool      `json:"public_logs"`
	PublicSysinfo bool      `json:"public_sysinfo"`
	PublicTCBInfo bool      `json:"public_tcbinfo"`
	TCB           *GuestTCB `json:"tcb"` // null unless public_tcbinfo
}

// GuestTCB is what the node can say about the machine it runs on.
type GuestTCB struct {
	Checks      *CheckReport `json:"checks"`       // host check results; null when not run
	AgentSHA256 string       `json:"agent_sha256"` // lowercase hex of the running agent binary
}

// AppKeyAttestation answers Worker.GetAttestationForAppKey: the node key
// (whose certificate the cluster CA issued to one instance) signs Message,
// which names the app and the app public key. Anyone holding the CA checks
// CertChain against it, then Signature over Message with the node cert's key.
type AppKeyAttestation struct {
	AppID        string `json:"app_id"`
	InstanceID   string `json:"instance_id"`
	AppPublicKey string `json:"app_public_key"` // hex Ed25519
	Message      string `json:"message"`        // the exact signed bytes
	Signature    string `json:"signature"`      // base64 ASN.1 ECDSA P-256 over SHA-256(Message)
	CertChain    string `json:"cert_chain"`     // PEM: node cert, then the CA cert
}

// GetKeyRequest is the body of POST /prpc/GetKey (Unix socket only).
type GetKeyRequest struct {
	Path      string `json:"path"`
	Algorithm string `json:"algorithm"` // "ed25519"
}

// GetKeyReply answers GetKey: Key is a secret.
type GetKeyReply struct {
	Key       string `json:"key"`        // secret: hex 32-byte seed
	PublicKey string `json:"public_key"` // hex Ed25519 public key
}

func (r GetKeyReply) String() string   { return fmt.Sprintf("GetKeyReply{public_key=%s}", r.PublicKey) }
func (r GetKeyReply) GoString() string { return r.String() }
func (r GetKeyReply) LogValue() slog.Value {
	return slog.GroupValue(slog.String("public_key", r.PublicKey))
}
