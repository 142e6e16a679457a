package rayhead

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/shim"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rayenv"
)

// ClusterConfig is the Ray head of one cluster as head up runs it.
type ClusterConfig struct {
	State  *statedir.State
	Config *config.Config // ray.head_address, ray.head_resources
	Python string         // the Ray head's Python (Python)
	// Autoscaler is the Ray cluster config for Ray's autoscaler and
	// PluginDir the dir of its plugin; "" runs no autoscaler.
	Autoscaler, PluginDir string
	OnFailing             func(times int, lastWords string) // a Ray head failing the same way again
	// RayVersion is the Ray head's Ray ("" asks Python): it picks the
	// GCS's store (OpenStore).
	RayVersion string
	// RedisServer is redis-server for Ray before RocksDBFrom ("" RedisServer).
	RedisServer string
	// NoStore runs the GCS without a store (OffStore): head up --gcs-store off.
	NoStore bool
	Log     *slog.Logger
}

// StartCluster writes (once) the Ray head's TLS and token files into
// STATE/ray-head and starts its supervisor. The Ray head's ports are
// chosen free (PickPorts), again for each restart, and its doors without a
// certificate kept on loopback by the shim.
func StartCluster(c ClusterConfig) (*Run, error) {
	address := c.Config.Ray.HeadAddress
	host, portText, _ := net.SplitHostPort(address)
	gcs, _ := strconv.Atoi(portText)
	headIP, err := netip.ParseAddr(host)
	if err != nil || !headIP.Unmap().Is4() {
		// The shim's loopback rule is IPv4 (head/shim): without it Ray 2.52's
		// job agent would take anyone's job on the head's IP.
		return nil, fmt.Errorf("ray.head_address %s: the Ray head needs an IPv4 head IP (its job agent and metrics are kept on loopback by an IPv4 rule); run it elsewhere with --no-ray-head", address)
	}
	st := c.State
	tmp := TempDir(st.Dir)
	if err := CheckTempDir(tmp); err != nil {
		return nil, err
	}
	if !PortFree(gcs) {
		return nil, fmt.Errorf("ray.head_address %s: port %d is in use on this machine (another cluster's Ray head? every cluster on one machine needs a GCS port of its own)", address, gcs)
	}
	files, err := FilesOnce(st, time.Now())
	if err != nil {
		return nil, err
	}
	shimDir, err := writeShim(st)
	if err != nil {
		return nil, err
	}
	version := c.RayVersion
	if version == "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		version, err = rayenv.Version(ctx, c.Python)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the Ray head's Ray version: %w", err)
		}
	}
	// The GCS keeps the cluster in a store under the state dir, so a GCS
	// that dies comes back with it (store.go).
	store := OffStore()
	if !c.NoStore {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		store, err = OpenStore(ctx, StoreConfig{StateDir: st.Dir, RayVersion: version, RedisServer: c.RedisServer, Log: c.Log})
		cancel()
		if err != nil {
			return nil, err
		}
	}
	c.Log.Info("ray head: GCS store", "store", store.Describe())
	// Each run's ports are chosen free when it starts (Relaunch).
	launch := func() (Launch, error) {
		ports, err := PickPorts(gcs, nil)
		if err != nil {
			return Launch{}, err
		}
		argv := WithPorts(Command(c.Python, address, tmp), ports)
		argv = WithResources(argv, c.Config.Ray.HeadResources)
		argv = store.Args(argv)
		env := Env(os.Environ(), files, c.Python)
		env = PortsEnv(env, ports, headIP.Unmap().String(), shimDir)
		env = store.Env(env)
		if c.Autoscaler != "" {
			argv = WithAutoscaler(argv, c.Autoscaler)
			env = AutoscalerEnv(env, c.PluginDir)
		}
		return Launch{Command: argv, Env: env, Ports: &ports,
			Dashboard: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Dashboard))}, nil
	}
	first, err := launch()
	if err != nil {
		store.Close()
		return nil, err
	}
	sup, err := New(Config{Command: first.Command, Env: first.Env,
		Address: address, Dashboard: first.Dashboard, TempDir: tmp,
		Ports: first.Ports, Relaunch: launch, OnFailing: c.OnFailing,
		LogPath: st.Path("ray-head.log"), StatePath: st.Path(StateFile),
		ID: store.ID, Store: store.Describe(),
		Log: c.Log.With("part", "ray-head")})
	if err != nil {
		store.Close()
		return nil, err
	}
	run, err := sup.Start()
	if err != nil {
		store.Close()
		return nil, err
	}
	run.store = store
	return run, nil
}

// writeShim writes the built-in shim into STATE/ray-head/shim for the Ray
// head's PYTHONPATH and returns that dir. On the head's machine the node
// IP is local, so the shim rewrites nothing but its loopback ports.
func writeShim(st *statedir.State) (string, error) {
	dir := filepath.Join(st.Path(FilesDir), "shim")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("ray head shim: %w", err)
	}
	content, _ := shim.Default()
	path := filepath.Join(dir, shim.Name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		return "", fmt.Errorf("ray head shim: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("ray head shim: %w", err)
	}
	return dir, nil
}

// Python is the Ray head's Python: flag (--python), $PYTHON, or python3,
// made an absolute path (a venv's bin/python stays itself, not what it
// links to): the status names it for `head run`, and its dir goes first on
// the Ray head's PATH.
func Python(flag string) string {
	python := flag
	if python == "" {
		python = os.Getenv("PYTHON")
	}
	if python == "" {
		python = "python3"
	}
	if p, err := exec.LookPath(python); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			python = abs
		}
	}
	return python
}

// CheckPython fails early when the Ray head's Python has no Ray, or
// another Ray than the config names (every node must run the head's Ray,
// and the enrollment refuses nodes of another version).
func CheckPython(ctx context.Context, python, want string) error {
	got, err := rayenv.Version(ctx, python)
	if err != nil {
		return fmt.Errorf("the Ray head's Python cannot import ray (%v): make a venv with it (head ray-env --version %s) and pass --python", err, cmp.Or(want, rayenv.Newest))
	}
	if want != "" && got != want {
		return fmt.Errorf("the Ray head's Python %s has Ray %s, the config's ray.version is %s (head ray-env --version %s makes one)", python, got, want, want)
	}
	return nil
}
