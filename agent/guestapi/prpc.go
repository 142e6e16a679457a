package guestapi

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/wire"
)

// Algorithm GetKey derives for.
const algEd25519 = "ed25519"

// maxKeyPath bounds GetKey's derivation path.
const maxKeyPath = 1024

// servePRPC answers one pRPC method of a judged route. Methods take GET or
// POST (pRPC clients use both); GetKey, which has a body, takes POST only.
func (s *Server) servePRPC(w http.ResponseWriter, r *http.Request, rt guestauth.Route) error {
	if rt.Name == "GetKey" {
		if err := methodIs(r, http.MethodPost); err != nil {
			return err
		}
		return s.getKey(w, r)
	}
	if err := methodIs(r, http.MethodGet, http.MethodPost); err != nil {
		return err
	}
	switch rt.Name {
	case "Version":
		writeJSON(w, http.StatusOK, wire.GuestVersion{Version: s.cfg.Version, Protocol: wire.Version})
	case "Health":
		writeJSON(w, http.StatusOK, wire.GuestHealth{Status: wire.GuestHealthOK})
	case "Info":
		writeJSON(w, http.StatusOK, s.info())
	case "GetAttestationForAppKey":
		a, err := s.attest()
		if errors.Is(err, errNoIdentity) {
			return refusal(http.StatusServiceUnavailable, "no_node_identity", err)
		}
		if err != nil {
			return refusal(http.StatusInternalServerError, "internal", fmt.Errorf("attestation: %w", err))
		}
		writeJSON(w, http.StatusOK, a)
	default:
		return unauthorized(fmt.Errorf("no method %q", rt.Name)) // fail closed
	}
	return nil
}

// info builds Worker.Info. The tcb block (and the TCB call behind it) exists
// only with public_tcbinfo. Callers build it only when the caller may see it.
func (s *Server) info() wire.GuestInfo {
	in := wire.GuestInfo{AppID: s.cfg.AppID, AppPublicKey: s.AppPublicKey(),
		PublicLogs: s.cfg.PublicLogs, PublicSysinfo: s.cfg.PublicSysinfo, PublicTCBInfo: s.cfg.PublicTCBInfo}
	if s.id != nil {
		in.InstanceID = s.id.instanceID
	}
	if s.switches.On(guestauth.SwitchTCBInfo) {
		tcb := wire.GuestTCB{}
		if s.cfg.TCB != nil {
			tcb = s.cfg.TCB()
		}
		in.TCB = &tcb
	}
	return in
}

// getKey derives an application key: seed = HKDF-SHA256(app root key, empty
// salt, info = path). Local surface only (the route table has no remote row).
func (s *Server) getKey(w http.ResponseWriter, r *http.Request) error {
	var req wire.GetKeyRequest
	if err := wire.Decode(r.Body, wire.MaxBody, &req); err != nil {
		return refusal(http.StatusBadRequest, err.Error(), nil)
	}
	if req.Algorithm != algEd25519 {
		return refusal(http.StatusBadRequest, "algorithm must be ed25519", nil)
	}
	if req.Path == "" || len(req.Path) > maxKeyPath {
		return refusal(http.StatusBadRequest, "path must be 1-1024 bytes", nil)
	}
	seed, err := guestauth.DeriveSeed(s.cfg.AppRootKey.Reveal(), req.Path)
	if err != nil {
		return refusal(http.StatusInternalServerError, "internal", fmt.Errorf("get key: %w", err))
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	writeJSON(w, http.StatusOK, wire.GetKeyReply{Key: hex.EncodeToString(seed), PublicKey: hex.EncodeToString(pub)})
	return nil
}
