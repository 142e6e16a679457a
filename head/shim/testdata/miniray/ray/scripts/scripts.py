"""python -m ray.scripts.scripts start --block --flag=value ...: binds and
connects as Ray's processes do (docs/protocol.md §9 facts, issue 9; sources: Ray's
python/ray/_private/runtime_env/agent/main.py binds --node-ip-address,
python/ray/dashboard/http_server_agent.py binds the node IP then 127.0.0.1,
src/ray/raylet binds 0.0.0.0, the core worker connects node IP:node manager
port). MINIRAY_MODE=dump prints the environment and exits; MINIRAY_SOCKPROBE
names the C program of the native steps, MINIRAY_FOREIGN_PORT a port that is
not the node's. Prints one JSON line and exits 1
when a step Ray cannot live without failed."""
import json
import os
import subprocess
import sys


def flags(argv):
    return dict(a[2:].partition("=")[::2] for a in argv if a.startswith("--"))


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return p.stdout.strip().replace("\n", "; ")


def dump():
    """What the shim did to this process: its env, its LD_PRELOAD files, its patches."""
    import socket
    libs = []
    for path in os.environ.get("LD_PRELOAD", "").split(":"):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                head = f.read(4)
            libs.append({"path": path, "dir_mode": oct(os.stat(os.path.dirname(path)).st_mode & 0o777),
                         "elf": head == b"\x7fELF"})
    patched = getattr(socket.socket.bind, "__module__", None) == "sitecustomize"
    return {"env": dict(os.environ), "preload": libs, "patched": patched}


def main():
    if sys.argv[1:2] != ["start"]:
        sys.exit("miniray: only start")
    f = flags(sys.argv[2:])
    if os.environ.get("MINIRAY_MODE") == "dump":
        print(json.dumps(dump()))
        return 0
    node, nm = f["node-ip-address"], f["node-manager-port"]
    py, probe = [sys.executable, "-m", "ray.step"], os.environ["MINIRAY_SOCKPROBE"]
    raylet = subprocess.Popen([probe, "tcp4", "listen", "0.0.0.0", nm, "hold"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, universal_newlines=True)
    res = {"raylet": raylet.stdout.readline().strip()}
    res["runtime_env_agent"] = run(py + ["bind", node, f["runtime-env-agent-port"]])
    port = f["dashboard-agent-listen-port"]
    res["dashboard_agent"] = run(py + ["bind", node, port, "bind", "127.0.0.1", port])
    res["core_worker"] = run([probe, "tcp4", "connect", node, nm])
    res["core_worker_v6"] = run([probe, "tcp6", "connect", "::ffff:" + node, nm])
    res["python_worker"] = run(py + ["connect", node, nm])
    # A port of another rental behind the same public IP: not the node's own.
    res["foreign_port"] = run(py + ["connect", node, os.environ["MINIRAY_FOREIGN_PORT"]])
    raylet.stdin.close()
    raylet.wait()
    print(json.dumps(res))
    vital = ("raylet", "runtime_env_agent", "core_worker", "python_worker")
    return 0 if all(res[k].startswith(("ok", "0 ok")) for k in vital) else 1


if __name__ == "__main__":
    sys.exit(main())
