package guestapi

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

const standaloneUsage = `usage: agent guest-api --app FILE --sys-config FILE --listen ADDR [--socket PATH]

Runs the guest API alone, for images that embed the agent without enrollment.

  --app FILE         the measured app file (JSON):
                       {"app_id":"…","app_root_key":"<base64, 32 bytes>",
                        "public_logs":false,"public_sysinfo":false,"public_tcbinfo":true,
                        "node_cert":"PATH","node_key":"PATH"}   (node_* optional; relative
                     paths are relative to the app file; node_cert may hold the CA after it)
  --sys-config FILE  the host's policy (JSON):
                       {"guest_agent_api":{"anonymous_scopes":[…],
                        "external_issuers":[{"name":"ops","public_keys":["<hex>"]}]}}
                     absent block or empty list: nothing is anonymous
  --listen ADDR      host:port (TCP; HTTPS when the app file names a node cert)
                     or vsock://CID:PORT
  --socket PATH      also serve the unauthenticated local surface (with GetKey)
                     on a 0600 Unix socket

Scopes: guest:version guest:health guest:info guest:attest-app-key
        guest:dashboard guest:containers guest:logs guest:metrics
An unknown scope or a bad issuer key refuses to start (exit 2).
/logs/agent serves this process's own log (when public_logs is on).
Mint tokens with tools/guesttoken.
`

// RunStandalone implements `agent guest-api`. It serves until ctx ends and
// returns the exit code: 0 after a clean stop, 2 on bad flags or config
// (the message names the problem), 1 when serving fails.
func RunStandalone(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent guest-api", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	appPath := fs.String("app", "", "")
	sysPath := fs.String("sys-config", "", "")
	listen := fs.String("listen", "", "")
	sock := fs.String("socket", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, standaloneUsage)
			return 0
		}
		fmt.Fprintf(stderr, "agent guest-api: %v\n\n%s", err, standaloneUsage)
		return 2
	}
	if *appPath == "" || *sysPath == "" || *listen == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agent guest-api: --app, --sys-config and --listen are required\n\n%s", standaloneUsage)
		return 2
	}
	ring := NewLogRing(MaxLogTail)
	log := slog.New(slog.NewTextHandler(io.MultiWriter(stderr, ring), nil))
	cfg, err := LoadStandalone(*appPath, *sysPath)
	if err != nil {
		fmt.Fprintf(stderr, "agent guest-api: %v\n", err)
		return 2
	}
	cfg.Log = log
	cfg.Logs = map[string]LogSource{"agent": ring}
	srv, err := New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "agent guest-api: %v\n", err)
		return 2
	}
	return serveStandalone(ctx, srv, *listen, *sock, log)
}

func serveStandalone(ctx context.Context, srv *Server, listen, sock string, log *slog.Logger) int {
	l, err := Listen(listen)
	if err != nil {
		log.Error("guest api cannot listen", "err", err)
		return 1
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.ServeTCP(l) }()
	log.Info("guest api listening", "addr", l.Addr().String(), "tls", srv.HasIdentity())
	if sock != "" {
		ul, err := ListenUnix(sock)
		if err != nil {
			srv.Close()
			log.Error("guest api cannot listen", "err", err)
			return 1
		}
		go func() { errc <- srv.serveLocal(ul) }()
		log.Info("guest api local socket", "path", sock)
	}
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return 0
	case err := <-errc:
		srv.Close()
		log.Error("guest api stopped", "err", err)
		return 1
	}
}

// LoadStandalone reads the app file and the sys-config into a Config
// (without Log, Logs, Now). Errors name the file and the problem, never a
// key's value.
func LoadStandalone(appPath, sysPath string) (Config, error) {
	app := wire.NewAppFile()
	if err := decodeFile(appPath, &app); err != nil {
		return Config{}, err
	}
	root, err := base64.StdEncoding.DecodeString(app.AppRootKey)
	if err != nil || len(root) != guestauth.AppRootKeyLen {
		return Config{}, fmt.Errorf("app file %s: app_root_key must be base64 of %d bytes", appPath, guestauth.AppRootKeyLen)
	}
	var sys wire.SysConfig
	if err := decodeFile(sysPath, &sys); err != nil {
		return Config{}, err
	}
	cfg := Config{AppID: app.AppID, AppRootKey: secret.NewBytes(root), PublicLogs: app.PublicLogs,
		PublicSysinfo: app.PublicSysinfo, PublicTCBInfo: app.PublicTCBInfo}
	if sys.GuestAgentAPI != nil {
		cfg.Policy = *sys.GuestAgentAPI
	}
	if app.NodeCert != "" || app.NodeKey != "" {
		dir := filepath.Dir(appPath)
		if cfg.NodeCertPEM, err = readRel(dir, app.NodeCert, "node_cert"); err != nil {
			return Config{}, fmt.Errorf("app file %s: %w", appPath, err)
		}
		key, err := readRel(dir, app.NodeKey, "node_key")
		if err != nil {
			return Config{}, fmt.Errorf("app file %s: %w", appPath, err)
		}
		cfg.NodeKeyPEM = secret.NewBytes(key)
	}
	return cfg, nil
}

func decodeFile(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	if err := wire.Decode(f, wire.MaxBody, v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

func readRel(dir, p, field string) ([]byte, error) {
	if p == "" {
		return nil, fmt.Errorf("%s: missing (node_cert and node_key go together)", field)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return b, nil
}
