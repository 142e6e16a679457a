"""The node `ray start` brings up: its settings and checks (Ray's RayParams
and Node), in Ray's order; tree.py starts its processes. Sources:
test/fakeray/SOURCES.md.
"""

import datetime
import errno
import os
import socket
import subprocess

from ray._private import checks

RAY_PATH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NATIVE = os.path.join(RAY_PATH, "core", "src", "ray")
RAYLET = os.path.join(NATIVE, "raylet", "raylet")
GCS_SERVER = os.path.join(NATIVE, "gcs", "gcs_server")
CORE_WORKER = os.path.join(NATIVE, "core_worker", "core_worker")
DEFAULT_TEMP_DIR = "/tmp/ray"
DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265


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
