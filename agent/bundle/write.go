package bundle

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rayvast/rayvast/internal/atomicfile"
	"github.com/rayvast/rayvast/internal/wire"
)

// Paths are the files of a written bundle, all inside one 0700 dir.
type Paths struct {
	Dir          string
	NodeCert     string // node.crt
	NodeKey      string // node.key, 0600
	CACert       string // ca.crt
	ClusterToken string // cluster_token, 0600: RAY_AUTH_TOKEN_PATH
	AppFile      string // app.json, 0600: the guest API's measured app file
	Info         string // bundle.json: everything but the secrets, for people
	ShimDir      string // shim/, first on Ray's PYTHONPATH; "" when no shim
	Socket       string // agent.sock: the guest API's local socket
}

// PathsIn names the files of a bundle in dir.
func PathsIn(dir string) Paths {
	j := func(n string) string { return filepath.Join(dir, n) }
	return Paths{Dir: dir, NodeCert: j("node.crt"), NodeKey: j("node.key"), CACert: j("ca.crt"),
		ClusterToken: j("cluster_token"), AppFile: j("app.json"), Info: j("bundle.json"),
		ShimDir: j("shim"), Socket: j("agent.sock")}
}

// Switches are the guest API's measured switches (docs/protocol.md §2), fixed at launch.
type Switches struct{ PublicLogs, PublicSysinfo, PublicTCBInfo bool }

// info is bundle.json: what was granted, without a single secret.
type info struct {
	InstanceID  string               `json:"instance_id"`
	CandidateID string               `json:"candidate_id"`
	NodeType    string               `json:"node_type"`
	AppID       string               `json:"app_id"`
	Shim        string               `json:"shim,omitempty"`
	Ray         wire.RayParams       `json:"ray"`
	GuestAPI    wire.GuestAPIGrant   `json:"guest_api"`
	Heartbeat   wire.HeartbeatParams `json:"heartbeat"`
}

// Write puts b into dir (created 0700, or tightened to 0700; refused when
// it is a symlink or another user's), each file written atomically. Keys
// and tokens are 0600.
func Write(dir string, b *Bundle, sw Switches) (Paths, error) {
	p := PathsIn(dir)
	if err := privateDir(dir); err != nil {
		return p, fmt.Errorf("write bundle: %w", err)
	}
	app := wire.AppFile{AppID: b.AppID, AppRootKey: base64.StdEncoding.EncodeToString(b.AppRootKey.Reveal()),
		PublicLogs: sw.PublicLogs, PublicSysinfo: sw.PublicSysinfo, PublicTCBInfo: sw.PublicTCBInfo,
		NodeCert: p.NodeCert, NodeKey: p.NodeKey}
	appJSON, err := json.MarshalIndent(app, "", "  ")
	if err != nil {
		return p, fmt.Errorf("write bundle: %w", err)
	}
	in := info{InstanceID: b.InstanceID, CandidateID: b.CandidateID, NodeType: b.NodeType, AppID: b.AppID, Ray: b.Ray, GuestAPI: b.GuestAPI, Heartbeat: b.Heartbeat}
	if b.Shim != nil {
		in.Shim = b.Shim.Name
	}
	infoJSON, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return p, fmt.Errorf("write bundle: %w", err)
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{p.NodeCert, b.NodeCertPEM, 0o644},
		{p.NodeKey, b.NodeKeyPEM.Reveal(), 0o600},
		{p.CACert, b.CACertPEM, 0o644},
		{p.ClusterToken, []byte(b.ClusterToken.Reveal()), 0o600},
		{p.AppFile, append(appJSON, '\n'), 0o600},
		{p.Info, append(infoJSON, '\n'), 0o644},
	}
	for _, f := range files {
		if err := atomicfile.Write(f.path, f.data, f.mode); err != nil {
			return p, err
		}
	}
	if b.Shim == nil {
		p.ShimDir = ""
		return p, nil
	}
	if err := privateDir(p.ShimDir); err != nil {
		return p, fmt.Errorf("write bundle: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(p.ShimDir, b.Shim.Name), b.Shim.Content, 0o644); err != nil {
		return p, err
	}
	return p, nil
}
