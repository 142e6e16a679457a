package rayhead

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
)

// TestUsesRocksDB: Ray 2.60 and later keep the GCS in RocksDB, older in Redis.
func TestUsesRocksDB(t *testing.T) {
	for v, want := range map[string]bool{"2.60.0": true, "2.61.1": true, "3.0.0": true, "2.52.1": false, "2.59.9": false, "": false, "2": false} {
		if got := UsesRocksDB(v); got != want {
			t.Errorf("UsesRocksDB(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestOpenStoreRocksDB: on Ray 2.60 the store is STATE/gcs-store/rocksdb,
// named to Ray by RAY_gcs_storage and RAY_gcs_storage_path with the
// reconnect wait, with no flag added; its ID is made once and read back.
func TestOpenStoreRocksDB(t *testing.T) {
	state := t.TempDir()
	s, err := OpenStore(context.Background(), StoreConfig{StateDir: state, RayVersion: "2.60.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(state, StoreDir, StoreRocksDB)
	env := s.Env([]string{"PATH=/bin", "RAY_gcs_storage=memory"})
	for _, kv := range []string{"RAY_gcs_storage=rocksdb", "RAY_gcs_storage_path=" + want, "RAY_gcs_rpc_server_reconnect_timeout_s=" + GCSReconnectS, "PATH=/bin"} {
		if !slices.Contains(env, kv) {
			t.Errorf("%q missing from %q", kv, env)
		}
	}
	if slices.Contains(env, "RAY_gcs_storage=memory") {
		t.Errorf("the old RAY_gcs_storage kept in %q", env)
	}
	if got := s.Args([]string{"ray"}); !slices.Equal(got, []string{"ray"}) {
		t.Errorf("RocksDB's args %q, want none added", got)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Errorf("%s not made: %v", want, err)
	}
	s2, err := OpenStore(context.Background(), StoreConfig{StateDir: state, RayVersion: "2.60.0"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s2.ID != s.ID {
		t.Errorf("store IDs %q then %q, want one, kept", s.ID, s2.ID)
	}
}

// TestStoreDirUnusable: a store dir that cannot be made (a file in its
// place) or written (a read-only mount, as root) is an error naming it
// and the fix, and the file in its place is left as it was.
func TestStoreDirUnusable(t *testing.T) {
	state := t.TempDir()
	block := filepath.Join(state, StoreDir)
	if err := os.WriteFile(block, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStore(context.Background(), StoreConfig{StateDir: state, RayVersion: "2.60.0"})
	if err == nil || !strings.Contains(err.Error(), block) || !strings.Contains(err.Error(), "writable") {
		t.Errorf("a file in the store dir's place: %v, want an error naming %s and the fix", err, block)
	}
	if b, _ := os.ReadFile(block); string(b) != "mine" {
		t.Errorf("the file in the store dir's place was changed: %q", b)
	}

	rvtest.NeedRoot(t) // below: permissions do not stop root, a read-only mount does
	ro := t.TempDir()
	if err := syscall.Mount("tmpfs", ro, "tmpfs", syscall.MS_RDONLY, "size=1m"); err != nil {
		t.Fatalf("read-only tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(ro, 0) })
	_, err = OpenStore(context.Background(), StoreConfig{StateDir: ro, RayVersion: "2.60.0"})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(ro, StoreDir)) || !strings.Contains(err.Error(), "writable") {
		t.Errorf("a read-only state dir: %v, want an error naming its store dir and the fix", err)
	}
}

// TestCheckRocksDB: a RocksDB dir without CURRENT, with a CURRENT naming
// no manifest or a missing one is refused with the path and the way out
// (move it aside); new, empty and whole stores pass; OpenStore refuses
// the damaged one and removes none of its files.
func TestCheckRocksDB(t *testing.T) {
	whole := func(t *testing.T, db string) {
		writeFiles(t, db, map[string]string{"CURRENT": "MANIFEST-000005\n", "MANIFEST-000005": "m", "000004.log": "l", "IDENTITY": "i"})
	}
	for _, c := range []struct {
		name, bad string // bad: "" passes, else a word of the error
		make      func(t *testing.T, db string)
	}{
		{"new", "", func(*testing.T, string) {}},
		{"empty", "", func(t *testing.T, db string) { _ = os.MkdirAll(db, 0o700) }},
		{"whole", "", whole},
		{"no CURRENT", "no CURRENT", func(t *testing.T, db string) {
			whole(t, db)
			_ = os.Remove(filepath.Join(db, "CURRENT"))
		}},
		{"CURRENT garbled", "names no manifest", func(t *testing.T, db string) {
			whole(t, db)
			writeFiles(t, db, map[string]string{"CURRENT": "\x00\x17junk"})
		}},
		{"manifest gone", "missing or empty", func(t *testing.T, db string) {
			whole(t, db)
			_ = os.Remove(filepath.Join(db, "MANIFEST-000005"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			path := filepath.Join(state, StoreDir, StoreRocksDB)
			whole(t, filepath.Join(path, "kv"))
			c.make(t, filepath.Join(path, "tables"))
			before := listFiles(t, path)
			_, err := OpenStore(context.Background(), StoreConfig{StateDir: state, RayVersion: "2.60.0"})
			if c.bad == "" {
				if err != nil {
					t.Fatalf("want it open: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("a damaged store opened, want %q", c.bad)
			}
			for _, w := range []string{c.bad, filepath.Join(path, "tables"), "mv " + path} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if after := listFiles(t, path); !slices.Equal(before, after) {
				t.Errorf("the store's files changed: %q → %q", before, after)
			}
		})
	}
}

// TestRedisMissing: Ray 2.52 without redis-server is an error saying what
// to install.
func TestRedisMissing(t *testing.T) {
	_, err := OpenStore(context.Background(), StoreConfig{StateDir: t.TempDir(), RayVersion: "2.52.1", RedisServer: "/nonexistent/redis-server"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install redis-server") || !strings.Contains(err.Error(), "/nonexistent/redis-server") {
		t.Errorf("redis-server missing: %v, want the path and the package", err)
	}
}

// TestRedisRefusing: a redis-server that exits at once is an error naming
// its config and data and quoting its log; the store's files stay.
func TestRedisRefusing(t *testing.T) {
	state := t.TempDir()
	fake := filepath.Join(t.TempDir(), "redis-server")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'FATAL CONFIG FILE ERROR: nope'\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStore(context.Background(), StoreConfig{StateDir: state, RayVersion: "2.52.1", RedisServer: fake, ReadyWithin: 5 * time.Second})
	if err == nil {
		t.Fatal("a Redis that exits at once: no error")
	}
	for _, w := range []string{"exited at once", "FATAL CONFIG FILE ERROR: nope", filepath.Join(state, StoreDir, "redis.conf"), filepath.Join(state, StoreDir, StoreRedis)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	pw, _ := os.ReadFile(filepath.Join(state, StoreDir, "redis.password"))
	if len(bytes.TrimSpace(pw)) == 0 || bytes.Contains([]byte(err.Error()), bytes.TrimSpace(pw)) {
		t.Errorf("the password file is empty, or the error holds the password: %v", err)
	}
}

// TestRedisReal: with Debian's redis-server, Ray 2.52's store is a Redis
// on 127.0.0.1 only, asking a password (0600 in the state dir) that Ray
// gets as a flag and never in its env, a log line or Describe; its data
// lives in the state dir and is there again after a stop and a new open
// with the same password.
func TestRedisReal(t *testing.T) {
	rvtest.NeedTools(t, "redis-server")
	state := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := OpenStore(context.Background(), StoreConfig{StateDir: state, RayVersion: "2.52.1", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	pwPath := filepath.Join(state, StoreDir, "redis.password")
	fi, err := os.Stat(pwPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file %s: %v %v, want mode 600", pwPath, fi, err)
	}
	pw := s.Password()
	addr := s.redis.addr
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("Redis at %s, want 127.0.0.1", addr)
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, ip := range hostIPs(t) { // the machine's other addresses: Redis is not there
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), time.Second); err == nil {
			c.Close()
			t.Errorf("Redis answers on %s:%s, want loopback only", ip, port)
		}
	}
	env := s.Env(nil)
	if !slices.Contains(env, "RAY_REDIS_ADDRESS="+addr) {
		t.Errorf("RAY_REDIS_ADDRESS missing from %q", env)
	}
	if strings.Contains(strings.Join(env, " "), pw.Reveal()) {
		t.Errorf("the password is in Ray's env")
	}
	if !slices.Contains(s.Args(nil), "--redis-password="+pw.Reveal()) {
		t.Errorf("Ray's args lack the password flag")
	}
	if err := redisPing(addr, secret.New("wrong")); err == nil {
		t.Errorf("Redis answered a wrong password")
	}
	if out, err := redisCmd(addr, pw, "SET", "rv-key", "kept"); err != nil || out != "+OK" {
		t.Fatalf("SET: %q %v", out, err)
	}
	s.Close()
	if redisPing(addr, pw) == nil {
		t.Errorf("Redis still answers after Close")
	}
	s2, err := OpenStore(context.Background(), StoreConfig{StateDir: state, RayVersion: "2.52.1", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !s2.Password().Equal(pw) || s2.ID != s.ID {
		t.Errorf("a new open made a new password or ID")
	}
	if out, err := redisCmd(s2.redis.addr, pw, "GET", "rv-key"); err != nil || out != "kept" {
		t.Errorf("after a restart GET rv-key = %q %v, want kept (data in %s)", out, err, s.Path)
	}
	for what, text := range map[string]string{"the log": logs.String(), "Describe": s.Describe(), "the redis log": readFile(t, filepath.Join(state, StoreDir, "redis.log"))} {
		if strings.Contains(text, pw.Reveal()) {
			t.Errorf("the password is in %s", what)
		}
	}
}

// redisCmd sends AUTH then one command and returns its reply's first line
// (a bulk string's value).
func redisCmd(addr string, pw secret.String, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	send := func(a ...string) {
		fmt.Fprintf(conn, "*%d\r\n", len(a))
		for _, x := range a {
			fmt.Fprintf(conn, "$%d\r\n%s\r\n", len(x), x)
		}
	}
	send("AUTH", pw.Reveal())
	send(args...)
	br := bufio.NewReader(conn)
	if l, err := br.ReadString('\n'); err != nil || strings.TrimSpace(l) != "+OK" {
		return "", fmt.Errorf("AUTH: %q %v", l, err)
	}
	l, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	l = strings.TrimSpace(l)
	if strings.HasPrefix(l, "$") {
		v, err := br.ReadString('\n')
		return strings.TrimSpace(v), err
	}
	return l, nil
}

// hostIPs are the machine's IPv4 addresses off loopback (at least one,
// else the test cannot prove Redis is on loopback only).
func hostIPs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	if len(out) == 0 {
		t.Fatal("no IPv4 address off loopback on this machine")
	}
	return out
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func listFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			out = append(out, strings.TrimPrefix(path, root))
		}
		return nil
	})
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}
