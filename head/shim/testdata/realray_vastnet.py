"""Ray behind vast's NAT, in the test's own namespaces (realray_test.go).

Two roles, each run in a network namespace of its own and a PID namespace
that dies with it (so no `ray stop`, which would stop every Ray on the
machine):

  realray_vastnet.py head TEMP_DIR   the Ray head at 10.200.0.1; prints
      "HEAD READY", then waits for a node with the resource "vastnode",
      runs one task there from a driver and prints one JSON line.
  realray_vastnet.py node TEMP_DIR   the node's `ray start --block` as the
      agent runs it (docs/protocol.md §9), node IP 203.0.113.7 (on no interface);
      prints "NODE STARTED" when `ray start` says so, "NODE EXITED <code>"
      when it exits, and stops when stdin closes.

Env: STANDIN_PYTHONPATH (the stand-in Ray's dir; empty for real Ray),
NODE_PYTHONPATH (the shim's dir, or empty), STARTED_LINE (what `ray start`
prints once the node runs), WAIT_S (how long the head waits for the node).
"""

import json
import os
import subprocess
import sys
import threading
import time

NODE_IP = "203.0.113.7"
HEAD = "10.200.0.1:6379"


def base_env(tmp):
    env = {"PATH": os.environ["PATH"], "RAY_USAGE_STATS_ENABLED": "0", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": tmp}
    if os.environ.get("STANDIN_PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["STANDIN_PYTHONPATH"]
    return env


def head(tmp):
    env = base_env(tmp)
    run = subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--node-ip-address=10.200.0.1", "--port=6379",
         "--num-cpus=0", "--include-dashboard=false", "--disable-usage-stats", "--temp-dir=" + tmp + "/ray"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if run.returncode != 0:
        print(json.dumps({"head_started": False, "error": run.stdout[-2000:]}), flush=True)
        return
    print("HEAD READY", flush=True)
    out = {"head_started": True, "node_alive": False, "task_node_ip": None}
    if os.environ.get("STANDIN_PYTHONPATH"):
        out["task_node_ip"] = "n/a: the stand-in runs no tasks"
        sys.stdin.read()  # until the test is done with the node
        print(json.dumps(out), flush=True)
        return
    os.environ.update(env)
    import ray

    ray.init(address=HEAD, logging_level="ERROR")
    deadline = time.time() + float(os.environ.get("WAIT_S", "60"))
    while time.time() < deadline and not out["node_alive"]:
        out["node_alive"] = any(n["Alive"] and "vastnode" in n["Resources"] for n in ray.nodes())
        time.sleep(0.5)
    if out["node_alive"]:

        @ray.remote(num_cpus=0, resources={"vastnode": 1})
        def where():
            return ray.util.get_node_ip_address()

        try:
            out["task_node_ip"] = ray.get(where.remote(), timeout=30)
        except Exception as e:
            out["task_error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out), flush=True)


def node(tmp):
    env = base_env(tmp)
    env["PYTHONPATH"] = ":".join(p for p in (os.environ.get("NODE_PYTHONPATH", ""), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--address=" + HEAD, "--node-ip-address=" + NODE_IP,
         "--node-manager-port=31001", "--object-manager-port=31002", "--runtime-env-agent-port=31003",
         "--dashboard-agent-grpc-port=31004", "--dashboard-agent-listen-port=31005", "--metrics-export-port=31006",
         "--worker-port-list=31010,31011,31012", "--num-gpus=0", "--num-cpus=1", '--resources={"vastnode": 1}'],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    for line in proc.stdout:
        sys.stderr.write(line)
        if os.environ["STARTED_LINE"] in line:
            print("NODE STARTED", flush=True)
    print("NODE EXITED %d" % proc.wait(), flush=True)


if __name__ == "__main__":
    {"head": head, "node": node}[sys.argv[1]](sys.argv[2])
