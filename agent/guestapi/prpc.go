package guestapi

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
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
func (s *Server) servePRPC(w http.ResponseWriter, r *http.Request, rt guestauth.Route) {
	if rt.Name == "GetKey" {
		if methodIs(w, r, http.MethodPost) {
			s.getKey(w, r)
		}
		return
	}
	if !methodIs(w, r, http.MethodGet, http.MethodPost) {
		return
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
			writeError(w, http.StatusServiceUnavailable, "no_node_identity")
			return
		}
		if err != nil {
			s.cfg.Log.Error("attestation failed", "err", err)
			writeError(w, http.StatusInternalServerError, "internal")
			return
		}
		writeJSON(w, http.StatusOK, a)
	default:
		unauthorized(w) // a row without a method: fail closed
	}
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
func (s *Server) getKey(w http.ResponseWriter, r *http.Request) {
	var req wire.GetKeyRequest
	if err := wire.Decode(r.Body, wire.MaxBody, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Algorithm != algEd25519 {
		writeError(w, http.StatusBadRequest, "algorithm must be ed25519")
		return
	}
	if req.Path == "" || len(req.Path) > maxKeyPath {
		writeError(w, http.StatusBadRequest, "path must be 1-1024 bytes")
		return
	}
	seed, err := guestauth.DeriveSeed(s.cfg.AppRootKey.Reveal(), req.Path)
	if err != nil {
		s.cfg.Log.Error("get key failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal")
		return
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	writeJSON(w, http.StatusOK, wire.GetKeyReply{Key: hex.EncodeToString(seed), PublicKey: hex.EncodeToString(pub)})
}
