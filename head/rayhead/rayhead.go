// Package rayhead runs the cluster's Ray head for `head up` and keeps it
// running: the process is restarted when it exits (at once after a run
// that came up, with backoff after one that did not), its output goes to a
// log file in the state dir, and its state is written to a small JSON file
// there so `head status` (another process) can show it.
//
// Each start is a new Ray head with an ID of its own: the head tells the
// nodes that ID in heartbeat answers, and a node whose Ray joined another
// one restarts its Ray at once instead of waiting for Ray's GCS timeout.
package rayhead

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StateFile is the name of the state file in the state dir.
const StateFile = "ray-head.json"

// States a Status can be in: starting from the process's start until
// `ray start` says its runtime started (the GCS answers), then running.
const (
	Starting   = "starting"
	Running    = "running"
	Restarting = "restarting"
	Stopped    = "stopped"
)

// Status is what the state file holds.
type Status struct {
	State   string `json:"state"`
	Address string `json:"address"`
	PID     int    `json:"pid,omitempty"`
	// ID is new at each start of the Ray head; the nodes hear it once the
	// Ray head runs (Current).
	ID       string    `json:"id,omitempty"`
	Since    time.Time `json:"since"`
	Restarts int       `json:"restarts"`
	LastExit string    `json:"last_exit,omitempty"`
	Log      string    `json:"log"`
	// Python is the Ray head's Python (its Ray is the cluster's), and
	// Dashboard its dashboard and job API (ip:port), for `head run` and
	// `head env`.
	Python    string `json:"python,omitempty"`
	Dashboard string `json:"dashboard,omitempty"`
	// Ports are the Ray head's ports head up chose (nil: not known).
	Ports *Ports `json:"ports,omitempty"`
	// LastWords are the last lines a run that exited before it came up
	// printed (Ray's own reason), and Failing how many runs in a row did so
	// with the same last line.
	LastWords string `json:"last_words,omitempty"`
	Failing   int    `json:"failing,omitempty"`
	// Store is where the GCS keeps the cluster across its restarts (kind
	// and path; "" none: a restart is a new cluster).
	Store string `json:"store,omitempty"`
}

// Config is one supervised Ray head.
type Config struct {
	Command []string // argv; Command[0] is looked up in PATH
	Env     []string // the whole environment of the process
	Address string   // ip:port, for the status only
	// Dashboard is where the Ray head serves its dashboard and job API
	// (ip:port), for the status only.
	Dashboard string
	// TempDir is the Ray head's own --temp-dir (see TempDir): its stale
	// ray_current_cluster file is removed before each start.
	TempDir string
	LogPath string // appended to; the process's stdout and stderr
	// StatePath is where the Status is written ("" writes nothing).
	StatePath string
	// A Ray head that came up (running) and exits is restarted at once.
	// One that exits before it came up waits MinBackoff (default 1 s), then
	// twice that, up to MaxBackoff (default 30 s); a run that came up or
	// lasted StableAfter (default 60 s) resets the wait.
	MinBackoff, MaxBackoff, StableAfter time.Duration
	// StopGrace is how long a SIGTERM is given before SIGKILL (default 10 s).
	StopGrace time.Duration
	// Ports are recorded in the status (nil: none).
	Ports *Ports
	// Relaunch, when set, makes each restart's command line, environment,
	// ports and dashboard anew (over Command, Env, Ports and Dashboard):
	// head up chooses the Ray head's ports free again, since another
	// cluster's Ray head may have bound one between this one's choice and
	// its bind (two head ups started at once), and Ray then exits.
	Relaunch func() (Launch, error)
	// OnFailing is told each time a run exits before it came up with the
	// same last line as the run before (failing counts them, 2 or more)
	// and Ray's last words; nil: only logged.
	OnFailing func(failing int, lastWords string)
	// ID, when set, is every run's ID: the Ray head keeps its cluster in a
	// store (Store) across restarts, so a restart is the same Ray head to
	// the nodes (Named); "" makes a new ID at each start.
	ID string
	// Store is the GCS's store for people (Status.Store; "" none).
	Store string
	Log   *slog.Logger
	Now   func() time.Time
}

// Launch is what one run of the Ray head starts with.
type Launch struct {
	Command, Env []string
	Ports        *Ports
	Dashboard    string
}

// Supervisor runs the Ray head until its context ends.
type Supervisor struct {
	cfg Config
	mu  sync.Mutex
	st  Status
	// tail is the current run's last lines (its ID: tailID), for its last
	// words.
	tail   []string
	tailID string
	// outDone is closed once the current run's output is read to its end.
	outDone chan struct{}
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Supervisor, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("ray head: no command")
	}
	if cfg.LogPath == "" {
		return nil, errors.New("ray head: no log path")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.MinBackoff)
	}
	if cfg.StableAfter <= 0 {
		cfg.StableAfter = time.Minute
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Supervisor{cfg: cfg, st: Status{Address: cfg.Address, Log: cfg.LogPath, Python: cfg.Command[0], Dashboard: cfg.Dashboard, Ports: cfg.Ports, Store: cfg.Store}}, nil
}

// lastWordsLines is how many of a failed run's last lines are kept.
const lastWordsLines = 5

// Status returns the current state.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *Supervisor) set(f func(*Status)) {
	s.mu.Lock()
	f(&s.st)
	s.st.Since = s.cfg.Now()
	st := s.st
	s.mu.Unlock()
	if s.cfg.StatePath == "" {
		return
	}
	b, _ := json.Marshal(st)
	tmp := s.cfg.StatePath + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, s.cfg.StatePath)
		if err != nil {
			s.cfg.Log.Warn("ray head state file", "err", err)
		}
	}
}

// Start launches the first process and returns once it runs (or failed to
// start); Run keeps it running.
func (s *Supervisor) Start() (*Run, error) {
	logf, err := os.OpenFile(s.cfg.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ray head log %s: %w", s.cfg.LogPath, err)
	}
	s.set(func(st *Status) { st.State = Starting })
	cmd, done, err := s.spawn(logf, s.cfg.Command, s.cfg.Env)
	if err != nil {
		logf.Close()
		s.set(func(st *Status) { st.State = Stopped; st.LastExit = err.Error() })
		return nil, err
	}
	return &Run{s: s, logf: logf, cmd: cmd, done: done}, nil
}

// Current is the ID of the Ray head that runs now; ok is false while none
// is up (starting, restarting, stopped).
func (s *Supervisor) Current() (id string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.ID, s.st.State == Running
}

// Named is what the heartbeat answers name as the Ray head: with a store
// (Config.ID) its one ID from the first start on, also while a run starts
// or restarts (the nodes' Ray waits for the GCS to come back); without one,
// Current.
func (s *Supervisor) Named() (id string, ok bool) {
	if s.cfg.ID == "" {
		return s.Current()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.ID, s.st.State != Stopped && s.st.State != ""
}

// Status is the supervisor's Status.
func (r *Run) Status() Status { return r.s.Status() }

// Named is the supervisor's Named.
func (r *Run) Named() (id string, ok bool) { return r.s.Named() }

// Run is a started supervisor.
type Run struct {
	s    *Supervisor
	logf *os.File
	cmd  *exec.Cmd
	done chan error
	// store, where set, is closed (Redis stopped) once the Ray head is.
	store *Store
}

// Current is the supervisor's Current.
func (r *Run) Current() (id string, ok bool) { return r.s.Current() }

// StartedLine is what `ray start` prints once its node is in the cluster
// (Ray 2.52 and 2.60, ray/scripts/scripts.py: after the GCS answered and,
// on a worker, after the raylet registered with it).
const StartedLine = "Ray runtime started"

// respawn starts a restart: with what Relaunch makes, where set.
func (s *Supervisor) respawn(logf io.Writer) (*exec.Cmd, chan error, error) {
	if s.cfg.Relaunch == nil {
		return s.spawn(logf, s.cfg.Command, s.cfg.Env)
	}
	l, err := s.cfg.Relaunch()
	if err != nil {
		return nil, nil, err
	}
	s.set(func(st *Status) { st.Ports, st.Dashboard = l.Ports, l.Dashboard })
	return s.spawn(logf, l.Command, l.Env)
}

// spawn starts one run of command with env.
func (s *Supervisor) spawn(logf io.Writer, command, env []string) (*exec.Cmd, chan error, error) {
	if s.cfg.TempDir != "" {
		// Ray refuses to start a head "already running at" its address when
		// this file names it and any process on the machine (a Docker
		// node's raylet included) carries that GCS address in its argv.
		if err := os.Remove(filepath.Join(s.cfg.TempDir, "ray_current_cluster")); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.cfg.Log.Warn("ray head: stale cluster address file", "err", err)
		}
	}
	// id tells this run's output from the last one's; public is the ID the
	// status and the nodes see (Config.ID where set).
	id := newID()
	public := cmp.Or(s.cfg.ID, id)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("ray head output pipe: %w", err)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = env
	// A pipe of our own, not os/exec's: Ray's daemons may hold its write
	// end after `ray start` is gone, and Wait must not wait for them.
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group: Ctrl-C at the terminal reaches head only, which
	// then stops Ray in order; and a stop reaches Ray's children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("start ray head: %w", err)
	}
	outDone := make(chan struct{})
	s.mu.Lock()
	s.tail, s.tailID, s.outDone = nil, id, outDone
	s.mu.Unlock()
	go func() { defer close(outDone); s.watchOutput(r, logf, id) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	s.set(func(st *Status) { st.State = Starting; st.PID = cmd.Process.Pid; st.ID = public })
	s.cfg.Log.Info("ray head starting", "pid", cmd.Process.Pid, "id", public, "address", s.cfg.Address, "log", s.cfg.LogPath)
	return cmd, done, nil
}

// watchOutput copies the Ray head's output to the log and marks that start
// running once Ray says its runtime started.
func (s *Supervisor) watchOutput(r *os.File, logf io.Writer, id string) {
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			_, _ = io.WriteString(logf, line)
			s.keepTail(id, line)
			if strings.Contains(line, StartedLine) {
				s.markRunning(id)
			}
		}
		if err != nil {
			return
		}
	}
}

// keepTail keeps line among run id's last lines.
func (s *Supervisor) keepTail(id, line string) {
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tailID != id {
		return
	}
	s.tail = append(s.tail, line)
	if len(s.tail) > lastWordsLines {
		s.tail = s.tail[len(s.tail)-lastWordsLines:]
	}
}

// lastWords are the last run's last lines, once its output ended (or
// after a second: Ray's daemons may hold the pipe).
func (s *Supervisor) lastWords() string {
	s.mu.Lock()
	done := s.outDone
	s.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.tail, "\n")
}

// lastLine is the last line of words.
func lastLine(words string) string {
	return words[strings.LastIndex(words, "\n")+1:]
}

func (s *Supervisor) markRunning(id string) {
	s.mu.Lock()
	now := s.tailID == id && s.st.State == Starting
	s.mu.Unlock()
	if !now {
		return
	}
	s.set(func(st *Status) {
		if s.tailID == id && st.State == Starting {
			st.State, st.Failing, st.LastWords = Running, 0, ""
		}
	})
	s.cfg.Log.Info("ray head running", "id", s.Status().ID, "address", s.cfg.Address)
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TempRoot is where the Ray heads' temp dirs are: /tmp, never $TMPDIR.
// Ray puts Unix sockets in its temp dir (…/session_<date>_<pid>/sockets/
// dash_DataHead and others), and a socket path may hold 107 bytes at most
// (AF_UNIX): with a TMPDIR of 24 characters Ray's dashboard failed and the
// Ray head never came up.
var TempRoot = "/tmp"

// TempDir is the Ray head's own temp dir for the state dir stateDir:
// short by construction (TempRoot/rv-<12 hex digits>, 20 bytes), and one
// per state dir, so no other Ray on the machine shares its address file.
func TempDir(stateDir string) string {
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join(TempRoot, "rv-"+hex.EncodeToString(sum[:6]))
}

// MaxTempDir is the longest temp dir whose Ray sockets fit in AF_UNIX's
// 107 bytes: Ray adds "/session_2026-12-03_10-31-00_123456_4194304"
// (43), "/sockets/" (9) and a socket's name (up to 32 allowed for here).
const MaxTempDir = 107 - 43 - 9 - 32

// CheckTempDir says why a Ray head cannot start in dir, before Ray fails
// on it: a path too long for Ray's Unix sockets.
func CheckTempDir(dir string) error {
	if len(dir) > MaxTempDir {
		return fmt.Errorf("ray head temp dir %s: %d bytes, at most %d fit: Ray's Unix socket paths in it (session dir, sockets/…) must stay within AF_UNIX's 107 bytes", dir, len(dir), MaxTempDir)
	}
	return nil
}

// Wait supervises until ctx ends, then stops the process (SIGTERM to its
// group, SIGKILL after StopGrace) and returns.
func (r *Run) Wait(ctx context.Context) {
	s := r.s
	defer r.logf.Close()
	if r.store != nil {
		defer r.store.Close()
	}
	backoff := s.cfg.MinBackoff
	for {
		started := s.cfg.Now()
		select {
		case <-ctx.Done():
			r.stop()
			s.set(func(st *Status) { st.State = Stopped; st.PID = 0 })
			return
		case err := <-r.done:
			exit := exitText(err)
			r.endGroup()
			cameUp := s.Status().State == Running
			delay := backoff
			switch {
			case cameUp:
				delay, backoff = 0, s.cfg.MinBackoff
			case s.cfg.Now().Sub(started) >= s.cfg.StableAfter:
				delay, backoff = s.cfg.MinBackoff, s.cfg.MinBackoff
			}
			failing := 0
			if !cameUp {
				words := s.lastWords()
				prev := s.Status().LastWords
				failing = 1
				if prev != "" && lastLine(prev) == lastLine(words) {
					failing = s.Status().Failing + 1
				}
				s.set(func(st *Status) { st.LastWords, st.Failing = words, failing })
			}
			s.set(func(st *Status) { st.State = Restarting; st.PID = 0; st.LastExit = exit; st.Restarts++ })
			s.cfg.Log.Warn("ray head exited; restarting", "exit", exit, "in", delay.String(), "log", s.cfg.LogPath)
			if failing >= 2 {
				words := s.Status().LastWords
				s.cfg.Log.Warn("ray head fails the same way again", "times", failing, "last_words", lastLine(words))
				if s.cfg.OnFailing != nil {
					s.cfg.OnFailing(failing, words)
				}
			}
			if delay > 0 {
				select {
				case <-ctx.Done():
					s.set(func(st *Status) { st.State = Stopped })
					return
				case <-time.After(delay):
				}
				backoff = min(2*backoff, s.cfg.MaxBackoff)
			}
			for {
				cmd, done, err := s.respawn(r.logf)
				if err == nil {
					r.cmd, r.done = cmd, done
					break
				}
				s.cfg.Log.Warn("ray head did not start", "err", err)
				select {
				case <-ctx.Done():
					s.set(func(st *Status) { st.State = Stopped })
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, s.cfg.MaxBackoff)
			}
		}
	}
}

// endGroup ends what an exited Ray head left in its process group and
// waits (at most StopGrace) until the group is empty: a dashboard of the
// last one still holding 127.0.0.1:8265 makes the next one wait 60 s for
// its own and come up without it.
func (r *Run) endGroup() {
	pid := r.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
		return
	}
	deadline := time.Now().Add(r.s.cfg.StopGrace)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.s.cfg.Log.Warn("ray head: processes of the last run still there", "pgid", pid)
}

func (r *Run) stop() {
	pid := r.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(r.s.cfg.StopGrace):
		r.s.cfg.Log.Warn("ray head ignored SIGTERM; killing", "pid", pid, "grace", r.s.cfg.StopGrace.String())
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-r.done
	}
	r.s.cfg.Log.Info("ray head stopped", "pid", pid)
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// ReadStatus reads the state file of a state dir; ok is false when there is
// none (no `head up` ran a Ray head there).
func ReadStatus(stateDir string) (Status, bool, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return Status{}, false, nil
	}
	if err != nil {
		return Status{}, false, err
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return Status{}, false, fmt.Errorf("%s: %w", StateFile, err)
	}
	return st, true, nil
}
