// Package statedir makes and reads the head's state dir (docs/protocol.md §8 `head
// init`): the CA, the head's serving certificate, the cluster token, the app
// id and the app root key. The dir is 0700 and every key file 0600; the CA
// key is read from here and never written anywhere else.
package statedir

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/internal/atomicfile"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/secret"
)

// File names inside the state dir.
const (
	CACert      = "ca.pem"
	CAKey       = "ca.key"
	HeadCert    = "head.pem"
	HeadKey     = "head.key"
	HeadInfo    = "head.json"
	Secrets     = "secrets.json"
	Registry    = "state.json" // v1 registry, migrated into Store on first start
	Store       = "state.db"   // the registry (bbolt)
	AdminSocket = "admin.sock"
)

// Options are `head init`'s flags.
type Options struct {
	Dir     string
	IP      string
	DNS     string
	Cluster string
	Rand    io.Reader // nil = crypto/rand
	Now     time.Time // zero = time.Now()
}

type info struct {
	Cluster   string    `json:"cluster"`
	HeadIP    string    `json:"head_ip"`
	DNS       string    `json:"dns,omitempty"`
	AppID     string    `json:"app_id"`
	CreatedAt time.Time `json:"created_at"`
	// StoreID is the id of the registry store this dir served with; once
	// set, a missing or empty store is an error, not a new cluster.
	StoreID string `json:"store_id,omitempty"`
}

type secrets struct {
	ClusterToken string `json:"cluster_token"`
	AppRootKey   string `json:"app_root_key"` // base64, 32 bytes
}

// Init creates a new state dir. It refuses to touch a dir that exists and
// is not empty.
func Init(o Options) error {
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	ip, err := netip.ParseAddr(o.IP)
	if err != nil {
		return fmt.Errorf("init: --ip %q is not an IP literal", o.IP)
	}
	if o.Dir == "" {
		return errors.New("init: --state is required")
	}
	if ents, err := os.ReadDir(o.Dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("init %s: state dir exists and is not empty; refusing to overwrite", o.Dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("init %s: %w", o.Dir, err)
	}
	files, err := newFiles(o, ip)
	if err != nil {
		return err
	}
	return writeDir(o.Dir, files)
}

type newFile struct {
	name string
	data []byte
	mode os.FileMode
}

// newFiles makes the contents of a new state dir.
func newFiles(o Options, ip netip.Addr) ([]newFile, error) {
	ca, caKey, err := pki.NewCA(o.Rand, o.Cluster, o.Now)
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	var dns []string
	if o.DNS != "" {
		dns = []string{o.DNS}
	}
	srv, err := ca.IssueServer(o.Rand, ip, dns, o.Now)
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	tok, appKey, appID := make([]byte, 32), make([]byte, 32), make([]byte, 20)
	for _, b := range [][]byte{tok, appKey, appID} {
		if _, err := io.ReadFull(o.Rand, b); err != nil {
			return nil, fmt.Errorf("init: random: %w", err)
		}
	}
	inf, _ := json.MarshalIndent(info{Cluster: o.Cluster, HeadIP: ip.String(), DNS: o.DNS, AppID: hex.EncodeToString(appID), CreatedAt: o.Now.UTC()}, "", " ")
	sec, _ := json.Marshal(secrets{ClusterToken: base64.RawURLEncoding.EncodeToString(tok), AppRootKey: base64.StdEncoding.EncodeToString(appKey)})
	// Keys first, head.json last: a half-written dir is refused by Load.
	return []newFile{
		{CAKey, caKey.Reveal(), 0o600},
		{HeadKey, srv.KeyPEM.Reveal(), 0o600},
		{Secrets, sec, 0o600},
		{CACert, ca.CertPEM, 0o644},
		{HeadCert, srv.CertPEM, 0o644},
		{HeadInfo, inf, 0o644},
	}, nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// State is a loaded state dir.
type State struct {
	Dir          string
	CA           *pki.CA
	ServerCert   tls.Certificate
	HeadIP       string
	Cluster      string
	AppID        string
	ClusterToken secret.String
	AppRootKey   secret.Bytes
	StoreID      string // "" until the dir first served
}

// Path is a file inside the state dir.
func (s *State) Path(name string) string { return filepath.Join(s.Dir, name) }

// Load reads a state dir made by Init. It refuses a dir or key file that
// others can read.
func Load(dir string) (*State, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("load state %s: mode %v, want 0700", dir, fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, HeadInfo)); errors.Is(err, os.ErrNotExist) {
		if _, kerr := os.Stat(filepath.Join(dir, CAKey)); kerr == nil {
			return nil, fmt.Errorf("load state %s: half-made (a killed head init?): %s is missing; remove the dir and run head init again", dir, HeadInfo)
		}
	}
	read := func(name string, private bool) ([]byte, error) {
		p := filepath.Join(dir, name)
		if private {
			fi, err := os.Stat(p)
			if err != nil {
				return nil, fmt.Errorf("load state: %w", err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				return nil, fmt.Errorf("load state %s: mode %v, want 0600", p, fi.Mode().Perm())
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("load state: %w", err)
		}
		return b, nil
	}
	s := &State{Dir: dir}
	caCert, err := read(CACert, false)
	if err != nil {
		return nil, err
	}
	caKey, err := read(CAKey, true)
	if err != nil {
		return nil, err
	}
	if s.CA, err = pki.LoadCA(caCert, caKey); err != nil {
		return nil, err
	}
	hc, err := read(HeadCert, false)
	if err != nil {
		return nil, err
	}
	hk, err := read(HeadKey, true)
	if err != nil {
		return nil, err
	}
	if s.ServerCert, err = tls.X509KeyPair(hc, hk); err != nil {
		return nil, fmt.Errorf("load head cert: %w", err)
	}
	ib, err := read(HeadInfo, false)
	if err != nil {
		return nil, err
	}
	var inf info
	if err := json.Unmarshal(ib, &inf); err != nil {
		return nil, fmt.Errorf("load %s: %w", HeadInfo, err)
	}
	s.HeadIP, s.Cluster, s.AppID, s.StoreID = inf.HeadIP, inf.Cluster, inf.AppID, inf.StoreID
	sb, err := read(Secrets, true)
	if err != nil {
		return nil, err
	}
	var sec secrets
	if err := json.Unmarshal(sb, &sec); err != nil {
		return nil, errors.New("load secrets.json: malformed") // never quote it
	}
	key, err := base64.StdEncoding.DecodeString(sec.AppRootKey)
	if err != nil || len(key) != 32 || sec.ClusterToken == "" {
		return nil, errors.New("load secrets.json: bad cluster_token or app_root_key")
	}
	s.ClusterToken, s.AppRootKey = secret.New(sec.ClusterToken), secret.NewBytes(key)
	return s, nil
}

// RecordStore writes the registry store's id into head.json (atomically),
// so the dir remembers it has served: a store missing later is an error.
func RecordStore(dir, id string) error {
	p := filepath.Join(dir, HeadInfo)
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("record store: %w", err)
	}
	var inf info
	if err := json.Unmarshal(b, &inf); err != nil {
		return fmt.Errorf("record store: %s: %w", p, err)
	}
	inf.StoreID = id
	out, _ := json.MarshalIndent(inf, "", " ")
	if err := atomicfile.Write(p, out, 0o644); err != nil {
		return fmt.Errorf("record store: %w", err)
	}
	return nil
}
