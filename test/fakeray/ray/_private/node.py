"""The node `ray start` brings up: its settings (Ray's RayParams and Node)
and its process tree (services.start_raylet and friends). Sources:
test/fakeray/SOURCES.md.
"""

import datetime
import errno
import glob
import json
import os
import signal
import socket
import subprocess
import sys

from ray._private import checks

RAY_PATH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NATIVE = os.path.join(RAY_PATH, "core", "src", "ray")
RAYLET = os.path.join(NATIVE, "raylet", "raylet")
GCS_SERVER = os.path.join(NATIVE, "gcs", "gcs_server")
CORE_WORKER = os.path.join(NATIVE, "core_worker", "core_worker")
DEFAULT_TEMP_DIR = "/tmp/ray"
DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
# Ray's --block treats these return codes as a graceful exit, not a failure.
EXPECTED_RETURN_CODES = (0, signal.SIGTERM, -signal.SIGTERM, 128 + signal.SIGTERM)


def configure(o, version, env):
    """Every check `ray start` makes before starting a process, in Ray's
    order, and the settings the tree needs. Raises checks.Abort."""
    resources = checks.resources(o["resources"])
    labels, labels_form = checks.labels(o["labels"])
    workers = checks.worker_ports(o)
    checks.other_params(o)
    checks.distinct_ports({
        "object_manager": [p for p in [o["object-manager-port"]] if p],
        "node_manager": [p for p in [o["node-manager-port"]] if p],
        "gcs_server": [o["port"]] if o["port"] else [],
        "dashboard_agent_grpc": [p for p in [o["dashboard-agent-grpc-port"]] if p],
        "dashboard_agent_http": [p for p in [o["dashboard-agent-listen-port"]] if p],
        "runtime_env_agent": [p for p in [o["runtime-env-agent-port"]] if p],
        "metrics_export": [p for p in [o["metrics-export-port"]] if p],
        "worker_ports": workers,
    })
    checks.head_or_worker(o)
    auth = checks.auth_token(version, env)
    tls = checks.tls(env)
    ensure_natives()
    ip = o["node-ip-address"] or ip_from_perspective(o["address"])
    cpus = o["num-cpus"] if o["num-cpus"] is not None else (os.cpu_count() or 1)
    cfg = {
        "head": o["head"],
        "address": o["address"],
        "gcs_port": (o["port"] or DEFAULT_GCS_PORT) if o["head"] else None,
        "node_ip_address": ip,
        "node_name": o["node-name"] or ip,
        "num_cpus": cpus,
        "num_gpus": o["num-gpus"] or 0,
        "resources": resources,
        "labels": labels,
        "labels_form": labels_form,
        "worker_ports": workers,
        "worker_port_list": o["worker-port-list"],
        "min_worker_port": o["min-worker-port"],
        "max_worker_port": o["max-worker-port"],
        "node_manager_port": o["node-manager-port"] or free_port(),
        "object_manager_port": o["object-manager-port"] or free_port(),
        "runtime_env_agent_port": o["runtime-env-agent-port"] or free_port(),
        "dashboard_agent_grpc_port": o["dashboard-agent-grpc-port"] or free_port(),
        "dashboard_agent_listen_port": o["dashboard-agent-listen-port"],
        "metrics_export_port": o["metrics-export-port"] or free_port(),
        "temp_dir": o["temp-dir"] or DEFAULT_TEMP_DIR,
        "auth_token_source": auth,
        "tls": tls,
        "usage_stats": not o["disable-usage-stats"],
    }
    cfg["dashboard"] = dashboard(o) if o["head"] else None
    cfg["session_dir"] = make_session(cfg["temp_dir"])
    return cfg


def dashboard(o):
    """services.start_api_server's settings: on unless --include-dashboard
    is false; an explicit --dashboard-port must be free now (else exit 1)
    and gets no retries; the default 8265 gets 50. A dashboard that fails
    to start exits 1, which `--block` then treats as any child's death."""
    if o["include-dashboard"] is False:
        return None
    host, port, retries = o["dashboard-host"], o["dashboard-port"], 0
    if port is None:
        port, retries = DEFAULT_DASHBOARD_PORT, 50
    else:
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise checks.Abort("Failed to bind to %s:%d because it's already occupied." % (host, port))
            raise checks.Abort("dashboard %s:%d: %s" % (host, port, e))
        finally:
            s.close()
    return {"host": host, "port": port, "port_retries": retries}


def ensure_natives():
    """The native raylet, GCS and core worker are built, never committed:
    build them on first use after a plain clone (build-natives.sh, cc),
    so every test that runs the stand-in works without a build step. In
    the Docker image they were built on the host before the copy."""
    natives = (RAYLET, GCS_SERVER, CORE_WORKER)
    if all(os.access(p, os.X_OK) for p in natives):
        return
    script = os.path.join(os.path.dirname(RAY_PATH), "build-natives.sh")
    if os.path.exists(script):
        r = subprocess.run(["sh", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise checks.Abort("fakeray: %s failed: %s" % (script, r.stdout.decode(errors="replace")[-2000:]))
    if not all(os.access(p, os.X_OK) for p in natives):
        raise checks.Abort("fakeray: native programs missing under %s: run test/fakeray/build-natives.sh" % NATIVE)


def ip_from_perspective(address):
    """services.get_node_ip_address: the source address of a UDP socket
    connected toward the GCS (or 8.8.8.8); connect() on UDP sends nothing."""
    host, port = "8.8.8.8", 80
    if address:
        host, _, p = address.rpartition(":")
        port = int(p) if p.isdigit() else 80
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((host.strip("[]"), port))
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


def free_port():
    """Ray picks a free port for each component left at 0 or unset."""
    s = socket.socket()
    s.bind(("", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def make_session(temp_dir):
    """Node._init_temp: TEMP/session_<date>_<pid> with logs/ and sockets/,
    session_latest pointing at it; fakeray/ holds the children's status."""
    name = "session_%s_%d" % (datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f"), os.getpid())
    session = os.path.join(temp_dir, name)
    for sub in ("logs", "sockets", "fakeray"):
        os.makedirs(os.path.join(session, sub), exist_ok=True)
    latest = os.path.join(temp_dir, "session_latest")
    try:
        tmp = latest + ".%d" % os.getpid()
        os.symlink(session, tmp)
        os.replace(tmp, latest)
    except OSError:
        pass
    return session


def block_sigint():
    """services.start_ray_process's preexec_fn: children ignore the
    terminal's SIGINT (Ray stops them itself)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


class Tree:
    """The processes `ray start --block` starts and watches."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.procs = {}  # name -> Popen, in start order
        self.status_dir = os.path.join(cfg["session_dir"], "fakeray")

    def spawn(self, name, argv, **kw):
        log = open(os.path.join(self.cfg["session_dir"], "logs", name + ".err"), "ab")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=log, preexec_fn=block_sigint, **kw)
        log.close()

    def start(self):
        c = self.cfg
        try:
            os.setpgrp()  # services.start_reaper: the reaper kills our group
        except OSError:
            pass
        self.spawn("reaper", [sys.executable, "-u", os.path.join(RAY_PATH, "_private", "ray_process_reaper.py")],
                   stdin=subprocess.PIPE)
        if c["head"]:
            self.spawn("gcs_server", [GCS_SERVER, "--gcs_server_port=%d" % c["gcs_port"],
                                      "--node_ip_address=" + c["node_ip_address"], "--session_dir=" + c["session_dir"]])
        if c["dashboard"]:
            d = c["dashboard"]
            self.spawn("dashboard", [sys.executable, "-u", os.path.join(RAY_PATH, "dashboard", "dashboard.py"),
                                     "--host=" + d["host"], "--port=%d" % d["port"], "--port-retries=%d" % d["port_retries"],
                                     "--session-dir=" + c["session_dir"], "--temp-dir=" + c["temp_dir"]])
        self.spawn("raylet", self.raylet_command())

    def agent_commands(self):
        c = self.cfg
        common = ["--node-ip-address=" + c["node_ip_address"], "--session-dir=" + c["session_dir"],
                  "--log-dir=" + os.path.join(c["session_dir"], "logs"), "--temp-dir=" + c["temp_dir"],
                  "--gcs-address=" + (c["address"] or "%s:%d" % (c["node_ip_address"], c["gcs_port"] or 0))]
        rea = [sys.executable, os.path.join(RAY_PATH, "_private", "runtime_env", "agent", "main.py"),
               "--runtime-env-agent-port=%d" % c["runtime_env_agent_port"]] + common
        da = [sys.executable, os.path.join(RAY_PATH, "dashboard", "agent.py"),
              "--metrics-export-port=%d" % c["metrics_export_port"],
              "--grpc-port=%d" % c["dashboard_agent_grpc_port"],
              "--listen-port=%d" % c["dashboard_agent_listen_port"]] + common + (["--head"] if c["head"] else [])
        return rea, da

    def raylet_command(self):
        c = self.cfg
        rea, da = self.agent_commands()
        cmd = [RAYLET,
               "--raylet_socket_name=" + os.path.join(c["session_dir"], "sockets", "raylet"),
               "--object_manager_port=%d" % c["object_manager_port"],
               "--min_worker_port=%d" % c["min_worker_port"],
               "--max_worker_port=%d" % c["max_worker_port"],
               "--node_manager_port=%d" % c["node_manager_port"],
               "--node_ip_address=" + c["node_ip_address"],
               "--static_resource_list=" + json.dumps(c["resources"]),
               "--python_worker_command=" + subprocess.list2cmdline([CORE_WORKER]),
               "--temp_dir=" + c["temp_dir"],
               "--session_dir=" + c["session_dir"],
               "--metrics_export_port=%d" % c["metrics_export_port"],
               "--runtime_env_agent_port=%d" % c["runtime_env_agent_port"],
               "--labels=" + (json.dumps(c["labels"]) if c["labels"] else ""),
               "--num_prestart_python_workers=%d" % c["num_cpus"],
               "--dashboard_agent_command=" + subprocess.list2cmdline(da),
               "--runtime_env_agent_command=" + subprocess.list2cmdline(rea)]
        if c["worker_port_list"] is not None:
            cmd.append("--worker_port_list=" + c["worker_port_list"])
        if c["head"]:
            cmd.append("--head")
        return cmd

    def statuses(self):
        out = {}
        for p in sorted(glob.glob(os.path.join(self.status_dir, "*.json"))):
            try:
                with open(p) as f:
                    s = json.load(f)
            except (OSError, ValueError):
                continue
            out[s.get("name", os.path.basename(p)[:-5])] = s
        return out

    def gather(self):
        """The record's view of the tree: each child's status, whether
        startup is over, and what a real node would lack."""
        st = self.statuses()
        raylet = st.get("raylet", {})
        workers = [k["name"] for k in raylet.get("children", []) if k["name"].startswith("core_worker_")]
        settled = (raylet.get("state") in ("running", "exited")
                   and all(st.get(n, {}).get("state") in ("running", "exited") for n in ["runtime_env_agent", "dashboard_agent"] + workers))
        if self.cfg["head"]:
            settled = settled and st.get("gcs_server", {}).get("state") in ("running", "exited")
        if self.cfg["dashboard"]:
            settled = settled and st.get("dashboard", {}).get("state") in ("running", "exited")
        return {"children": st, "started": bool(settled), "problems": problems(st, raylet, workers)}

    def unexpected_deaths(self):
        return {n: p.returncode for n, p in self.procs.items()
                if n != "reaper" and p.poll() is not None and p.returncode not in EXPECTED_RETURN_CODES}

    def kill_all(self):
        """Node.kill_all_processes: SIGTERM, a grace period, SIGKILL; the
        reaper last."""
        order = [n for n in self.procs if n != "reaper"] + (["reaper"] if "reaper" in self.procs else [])
        for n in order:
            p = self.procs[n]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def problems(st, raylet, workers):
    """What keeps this node from working as a Ray node, in words a test can
    match: failed binds and connects, an agent's HTTP server off, workers
    without a port or unregistered."""
    out = []
    for name, s in st.items():
        for b in s.get("binds", []):
            if not b.get("ok"):
                out.append("%s: bind %s:%s: %s" % (name, b["addr"], b["port"], b.get("errno_name") or b.get("error")))
        conn = s.get("connect") or s.get("runtime_env_agent_connect")
        if conn and not conn.get("ok"):
            out.append("%s: connect %s:%s: %s" % (name, conn["addr"], conn["port"], conn.get("errno_name") or conn.get("error")))
        for c in s.get("worker_connects", []):
            if not c.get("ok"):
                out.append("%s: connect %s:%s: %s" % (name, c["addr"], c["port"], c.get("errno_name") or c.get("error")))
        if s.get("http_server") == "off":
            out.append("%s: HTTP server off" % name)
    if raylet.get("no_available_ports"):
        out.append("raylet: No available ports (%d workers)" % raylet["no_available_ports"])
    for w in workers:
        if not st.get(w, {}).get("registered"):
            out.append("%s: not registered with the raylet" % w)
    if raylet and raylet.get("runtime_env_agent_connect") is None and raylet.get("state") == "running":
        out.append("raylet: never reached the runtime-env agent")
    return out
