package wire

// AppFile is the guest API's measured app file (docs/protocol.md §9): fixed at launch.
type AppFile struct {
	AppID         string `json:"app_id"`
	AppRootKey    string `json:"app_root_key"` // secret, base64 of 32 bytes
	PublicLogs    bool   `json:"public_logs"`
	PublicSysinfo bool   `json:"public_sysinfo"`
	PublicTCBInfo bool   `json:"public_tcbinfo"`
	// Optional node identity, for GetAttestationForAppKey.
	NodeCert string `json:"node_cert,omitempty"` // path to PEM
	NodeKey  string `json:"node_key,omitempty"`  // path to PEM
}

// SysConfig is the host's sys-config file, in the seed's shape.
type SysConfig struct {
	GuestAgentAPI *GuestAPIPolicy `json:"guest_agent_api"`
}

// NewAppFile returns the defaults to decode an app file into: public_tcbinfo
// is on unless the file says otherwise (docs/protocol.md §9), the other switches off.
func NewAppFile() AppFile { return AppFile{PublicTCBInfo: true} }
