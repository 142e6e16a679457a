package rayhead

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/head/rayversion"
	"github.com/rayvast/rayvast/internal/atomicfile"
	"github.com/rayvast/rayvast/internal/secret"
)

// The GCS's store (issue 43): the Ray head's GCS keeps the cluster's
// tables (actors, placement groups, jobs, nodes, its KV) in a store on the
// head's machine, under the state dir, so that a GCS that dies (and the
// whole Ray head with it, `ray start --block` ends the rest) comes back on
// the same address and port with the same cluster: the nodes' raylets
// reconnect to it and what runs on the nodes goes on.
//
// Ray 2.60 and later: the GCS's own RocksDB storage (RAY_gcs_storage=rocksdb,
// RAY_gcs_storage_path). Older Ray (2.52): a Redis that head up starts and
// owns (Debian's redis-server), on 127.0.0.1 only, with a password kept in
// the state dir, its data in the state dir too.

// StoreDir is the store's dir in the state dir.
const StoreDir = "gcs-store"

// The store's kinds (Status.Store).
const (
	StoreRocksDB = "rocksdb"
	StoreRedis   = "redis"
	// StoreOff: head up --gcs-store off. The GCS keeps the cluster in
	// memory only, as Ray does by default: a GCS that dies is a new
	// cluster (a new Ray head ID at each start, so the nodes' agents
	// restart their Ray toward it) and takes every actor, task and
	// placement group with it. For a user who wants no store on the
	// head's machine (no disk writes, no Redis) and accepts that.
	StoreOff = "off"
)

// OffStore is the store head up --gcs-store off uses: none. Its ID is ""
// (Config.ID: a new ID at each start) and it adds nothing to Ray's env or
// argv.
func OffStore() *Store {
	return &Store{Kind: StoreOff}
}

// RocksDBFrom is the first Ray whose GCS has its own RocksDB storage.
const RocksDBFrom = "2.60"

// RedisServer is the redis-server head up runs for Ray before RocksDBFrom,
// looked up in PATH.
var RedisServer = "redis-server"

// GCSReconnectS is how long the Ray head's own raylet and workers wait for
// a restarting GCS (RAY_gcs_rpc_server_reconnect_timeout_s): a Ray head
// restart takes about 10 s, a slow one (backoff after a failed run) up to
// a minute; the nodes' agents set the same (agent/raylaunch).
const GCSReconnectS = "120"

// StoreConfig is one cluster's store.
type StoreConfig struct {
	StateDir   string
	RayVersion string // the Ray head's Ray
	Log        *slog.Logger
	// RedisServer is redis-server's path or name ("" RedisServer).
	RedisServer string
	// ReadyWithin bounds how long a started Redis may take to answer
	// (default 10 s).
	ReadyWithin time.Duration
}

// Store is a cluster's GCS store, open.
type Store struct {
	Kind string
	Dir  string // STATE/gcs-store
	// ID names the store: the Ray head's ID for every run that uses it
	// (Config.ID), so nodes keep their Ray across a restart of the Ray head.
	ID string
	// Path is RocksDB's dir (RAY_gcs_storage_path) or Redis's data dir.
	Path string

	env      []string
	password secret.String
	redis    *redisRun
}

// Env is env with what the Ray head needs to use the store.
func (s *Store) Env(env []string) []string {
	return withVars(env, s.env)
}

// Args is argv with what `ray start --head` needs to use the store: Redis's
// password (Ray takes it as a flag only; it stays out of every env).
func (s *Store) Args(argv []string) []string {
	if s.password.IsZero() {
		return argv
	}
	return append(append([]string(nil), argv...), "--redis-password="+s.password.Reveal())
}

// Password is Redis's password (zero with RocksDB), for the tests that look
// for it where it must not be.
func (s *Store) Password() secret.String { return s.password }

// Describe is the store for people: kind and dir.
func (s *Store) Describe() string {
	if s.Kind == StoreOff {
		return StoreOff
	}
	if s.Kind == StoreRedis && s.redis != nil {
		return fmt.Sprintf("%s at %s (data %s)", s.Kind, s.redis.addr, s.Path)
	}
	return fmt.Sprintf("%s (%s)", s.Kind, s.Path)
}

// Close stops what the store runs (Redis); its data stays.
func (s *Store) Close() {
	if s.redis != nil {
		s.redis.close()
	}
}

// OpenStore makes (once) and checks the store of the state dir, and starts
// Redis where Ray needs it. A store it cannot use is an error that names
// the path and what to do; nothing in the state dir is removed or changed
// but the store's own new files.
func OpenStore(ctx context.Context, c StoreConfig) (*Store, error) {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(c.StateDir, StoreDir)
	if err := writableDir(dir); err != nil {
		return nil, err
	}
	id, err := storeID(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{Dir: dir, ID: id}
	if UsesRocksDB(c.RayVersion) {
		s.Kind, s.Path = StoreRocksDB, filepath.Join(dir, StoreRocksDB)
		if err := writableDir(s.Path); err != nil {
			return nil, err
		}
		if err := CheckRocksDB(s.Path); err != nil {
			return nil, err
		}
		s.env = []string{"RAY_gcs_storage=rocksdb", "RAY_gcs_storage_path=" + s.Path,
			"RAY_gcs_rpc_server_reconnect_timeout_s=" + GCSReconnectS}
		return s, nil
	}
	s.Kind, s.Path = StoreRedis, filepath.Join(dir, StoreRedis)
	if err := writableDir(s.Path); err != nil {
		return nil, err
	}
	pw, err := redisPassword(dir)
	if err != nil {
		return nil, err
	}
	s.password = pw
	r, err := startRedis(ctx, c, dir, s.Path, pw)
	if err != nil {
		return nil, err
	}
	s.redis = r
	s.env = []string{"RAY_REDIS_ADDRESS=" + r.addr, "RAY_gcs_rpc_server_reconnect_timeout_s=" + GCSReconnectS}
	return s, nil
}

// UsesRocksDB is whether the Ray version v keeps its GCS in RocksDB (else
// in Redis).
func UsesRocksDB(v string) bool {
	got, ok := Parts(v)
	want, _ := Parts(RocksDBFrom)
	if !ok || len(got) < 2 {
		return false
	}
	if got[0] != want[0] {
		return got[0] > want[0]
	}
	return got[1] >= want[1]
}

// Parts is rayversion.Parts.
func Parts(v string) ([]int, bool) { return rayversion.Parts(v) }

// writableDir makes dir (0700) and proves a file can be written in it.
func writableDir(dir string) error {
	fix := "make it writable by this user (chown/chmod u+rwx), or run head up with a state dir of its own"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the GCS store dir %s cannot be made (%v): %s", dir, err, fix)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("the GCS store dir %s is not writable (%v): %s", dir, err, fix)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// storeID is the store's ID, made once (STATE/gcs-store/id): a store moved
// aside or removed is a new cluster, with a new ID.
func storeID(dir string) (string, error) {
	path := filepath.Join(dir, "id")
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("the GCS store's ID %s: %w", path, err)
	}
	id := newID()
	if err := atomicfile.Write(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("the GCS store's ID: %w", err)
	}
	return id, nil
}

// rocksDBParts are the RocksDB databases Ray's GCS keeps in its storage
// path (seen with Ray 2.60: kv and tables).
var rocksDBParts = []string{"kv", "tables"}

// CheckRocksDB says why the GCS's RocksDB dir cannot be opened, before Ray
// fails on it over and over: a database whose CURRENT file is missing,
// empty or names a manifest that is not there. A missing or empty dir is
// a new store.
func CheckRocksDB(path string) error {
	fix := fmt.Sprintf("move it aside (mv %s %s.damaged) and start again: the Ray head starts with an empty store, and what it kept (detached actors, placement groups, jobs) is lost; nothing was removed", path, path)
	for _, part := range rocksDBParts {
		db := filepath.Join(path, part)
		ents, err := os.ReadDir(db)
		if errors.Is(err, os.ErrNotExist) || (err == nil && len(ents) == 0) {
			continue
		}
		if err != nil {
			return fmt.Errorf("the GCS's RocksDB store %s cannot be read (%v): %s", db, err, fix)
		}
		cur, err := os.ReadFile(filepath.Join(db, "CURRENT"))
		if err != nil {
			return fmt.Errorf("the GCS's RocksDB store %s is damaged: no CURRENT file (%v): %s", db, err, fix)
		}
		manifest := strings.TrimSpace(string(cur))
		if !strings.HasPrefix(manifest, "MANIFEST-") || strings.ContainsAny(manifest, "/\x00") {
			return fmt.Errorf("the GCS's RocksDB store %s is damaged: its CURRENT file names no manifest (%q): %s", db, truncate(manifest, 40), fix)
		}
		if st, err := os.Stat(filepath.Join(db, manifest)); err != nil || st.Size() == 0 {
			return fmt.Errorf("the GCS's RocksDB store %s is damaged: its manifest %s is missing or empty: %s", db, manifest, fix)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// redisPassword is Redis's password, made once (STATE/gcs-store/redis.password, 0600).
func redisPassword(dir string) (secret.String, error) {
	path := filepath.Join(dir, "redis.password")
	b, err := os.ReadFile(path)
	if err == nil {
		if pw := strings.TrimSpace(string(b)); pw != "" {
			if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
				return secret.String{}, fmt.Errorf("Redis's password file %s is readable by others (mode %o): chmod 600 %s", path, st.Mode().Perm(), path)
			}
			return secret.New(pw), nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return secret.String{}, fmt.Errorf("Redis's password file %s: %w", path, err)
	}
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	pw := hex.EncodeToString(raw)
	if err := atomicfile.Write(path, []byte(pw+"\n"), 0o600); err != nil {
		return secret.String{}, fmt.Errorf("Redis's password: %w", err)
	}
	return secret.New(pw), nil
}

// redisRun is the Redis head up runs: restarted on the same port when it
// exits, until close.
type redisRun struct {
	addr    string
	argv    []string
	logPath string
	log     *slog.Logger
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	closing chan struct{}
	ended   chan struct{}
}

// startRedis writes Redis's config (0600: it holds the password) and
// starts it on a free loopback port, and returns once it answers AUTH and
// PING.
func startRedis(ctx context.Context, c StoreConfig, dir, data string, pw secret.String) (*redisRun, error) {
	bin := c.RedisServer
	if bin == "" {
		bin = RedisServer
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("Ray %s keeps its GCS's state in Redis, and %s is not there (%v): install it (apt-get install redis-server) or use Ray %s or later (its GCS keeps its state in RocksDB)", c.RayVersion, bin, err, RocksDBFrom)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	conf := filepath.Join(dir, "redis.conf")
	text := strings.Join([]string{
		"# written by head up at each start: Redis for the Ray head's GCS (issue 43)",
		"bind 127.0.0.1",
		"protected-mode yes",
		"port " + strconv.Itoa(port),
		"daemonize no",
		"dir " + quoteConf(data),
		"appendonly yes",
		"appendfsync everysec",
		"save \"\"",
		"logfile \"\"",
		"requirepass " + pw.Reveal(),
		"",
	}, "\n")
	if err := atomicfile.Write(conf, []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("Redis's config: %w", err)
	}
	r := &redisRun{addr: addr, argv: []string{path, conf}, logPath: filepath.Join(dir, "redis.log"),
		log: c.Log.With("part", "redis"), closing: make(chan struct{}), ended: make(chan struct{})}
	if err := r.spawn(); err != nil {
		return nil, err
	}
	within := c.ReadyWithin
	if within <= 0 {
		within = 10 * time.Second
	}
	if err := r.ready(ctx, pw, within); err != nil {
		r.close()
		return nil, fmt.Errorf("Redis for the GCS (%s, config %s, data %s) %v; its log %s says:\n%s\nfix what it says, or move %s aside to start with an empty store (what it kept is then lost)", addr, conf, data, err, r.logPath, lastLogLines(r.logPath, 5), data)
	}
	go r.keep()
	return r, nil
}

func quoteConf(s string) string { return strconv.Quote(s) }

// freeLoopbackPort is a port free on 127.0.0.1, from the kernel.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("a loopback port for Redis: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (r *redisRun) spawn() error {
	logf, err := os.OpenFile(r.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("Redis's log %s: %w", r.logPath, err)
	}
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", r.argv[0], err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	r.log.Info("redis started", "pid", cmd.Process.Pid, "address", r.addr, "log", r.logPath)
	return nil
}

// ready waits until Redis answers AUTH and PING, or exits, or within ends.
func (r *redisRun) ready(ctx context.Context, pw secret.String, within time.Duration) error {
	deadline := time.Now().Add(within)
	last := errors.New("did not answer")
	for time.Now().Before(deadline) {
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		select {
		case <-done:
			return errors.New("exited at once")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = redisPing(r.addr, pw); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("did not answer within %s (%v)", within, last)
}

// keep restarts Redis when it exits, on the same port, until close.
func (r *redisRun) keep() {
	defer close(r.ended)
	for {
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		select {
		case <-r.closing:
			return
		case <-done:
		}
		r.log.Warn("redis exited; restarting", "log", r.logPath)
		select {
		case <-r.closing:
			return
		case <-time.After(time.Second):
		}
		if err := r.spawn(); err != nil {
			r.log.Warn("redis did not start", "err", err)
			select {
			case <-r.closing:
				return
			case <-time.After(5 * time.Second):
			}
			r.mu.Lock()
			r.done = closedChan()
			r.mu.Unlock()
		}
	}
}

func closedChan() chan struct{} { c := make(chan struct{}); close(c); return c }

// close stops Redis (SIGTERM: it writes its append-only file; SIGKILL
// after 10 s).
func (r *redisRun) close() {
	select {
	case <-r.closing:
		return
	default:
		close(r.closing)
	}
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	r.log.Info("redis stopped", "pid", cmd.Process.Pid)
}

// redisPing sends AUTH and PING (RESP) and wants +OK and +PONG.
func redisPing(addr string, pw secret.String) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	p := pw.Reveal()
	if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$4\r\nPING\r\n", len(p), p); err != nil {
		return err
	}
	br := bufio.NewReader(conn)
	for _, want := range []string{"+OK", "+PONG"} {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(line); got != want {
			return fmt.Errorf("refused: %s", truncate(got, 120))
		}
	}
	return nil
}

// lastLogLines are a log's last n lines, indented.
func lastLogLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
