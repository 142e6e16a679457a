"""The process tree `ray start --block` starts and watches (Ray's
services.start_raylet, start_reaper, start_api_server and Node's process
bookkeeping). Sources: test/fakeray/SOURCES.md.
"""

import glob
import json
import os
import signal
import subprocess
import sys

from ray._private.node import CORE_WORKER, GCS_SERVER, RAY_PATH, RAYLET

# Ray's --block treats these return codes as a graceful exit, not a failure.
EXPECTED_RETURN_CODES = (0, signal.SIGTERM, -signal.SIGTERM, 128 + signal.SIGTERM)


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
