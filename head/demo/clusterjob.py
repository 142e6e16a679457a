"""A Ray job that proves a rayvast cluster is a Ray cluster.

Run on the head's machine with the cluster's env (`head run --state DIR --
python clusterjob.py --nodes N`): it waits until N worker nodes are alive in
Ray, runs one task pinned to each (timing the first task on each node), makes
a 20 MiB object on one worker and reads it on another (so it crosses vast's
NAT, node to node), and prints one JSON line, then exits 0 when all of it
worked, 1 otherwise. `head demo` and the end-to-end tests run it.
"""

import argparse
import hashlib
import json
import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

OBJECT_BYTES = 20 * 1024 * 1024


def blob_bytes(n):
    # Deterministic content, so the reader's digest can be checked here.
    block = hashlib.sha256(b"rayvast").digest() * 1024  # 32 KiB
    return (block * (n // len(block) + 1))[:n]


@ray.remote(num_cpus=1)
def where(submitted):
    import socket

    ctx = ray.get_runtime_context()
    return {
        "node_id": ctx.get_node_id(),
        "hostname": socket.gethostname(),
        "started_after_s": round(time.time() - submitted, 3),
    }


@ray.remote(num_cpus=1)
def make_blob(n):
    return blob_bytes(n)


@ray.remote(num_cpus=1)
def read_blob(blobs):
    # A list, so Ray hands the ref itself and the fetch is timed here.
    start = time.time()
    data = ray.get(blobs[0])
    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "fetch_s": round(time.time() - start, 3),
    }


def workers_by_ip():
    # The Ray head is the node with Ray's head resource; the rest are ours.
    # Ray keys a node by its IP: a node whose Ray restarted is listed twice
    # until Ray marks the old entry dead.
    by_ip = {}
    for n in ray.nodes():
        if n.get("Alive") and "node:__internal_head__" not in n.get("Resources", {}):
            by_ip.setdefault(n["NodeManagerAddress"], []).append(n)
    return {ip: ns[0] for ip, ns in by_ip.items() if len(ns) == 1}


def pinned(node_id):
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def first_task(ip, deadline, task_timeout):
    """Runs one task on the node at ip; an entry Ray still lists for a Ray
    that died (it takes Ray some seconds to notice) refuses the task, so the
    node is looked up again until the deadline."""
    last = None
    while True:
        node = workers_by_ip().get(ip)
        if node is not None:
            start = time.time()
            try:
                got = ray.get(where.options(scheduling_strategy=pinned(node["NodeID"])).remote(start), timeout=task_timeout)
                return node, time.time() - start, got
            except ray.exceptions.TaskUnschedulableError as e:
                last = e
        if time.time() > deadline:
            raise last or TimeoutError("no live Ray node at %s" % ip)
        time.sleep(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=2, help="worker nodes to wait for and use")
    ap.add_argument("--wait", type=float, default=180, help="seconds to wait for the worker nodes")
    ap.add_argument("--task-timeout", type=float, default=120, help="seconds a task may take")
    ap.add_argument("--ips", default="", help="comma-separated public IPs of the nodes to use (default: any)")
    args = ap.parse_args()

    t0 = time.time()
    ray.init(logging_level="WARNING")
    connect_s = time.time() - t0
    out = {"ray_version": ray.__version__, "connect_s": round(connect_s, 3), "nodes": [], "ok": False}
    deadline = time.time() + args.wait
    want = set(filter(None, args.ips.split(",")))

    def candidates():
        return {ip: n for ip, n in workers_by_ip().items() if not want or ip in want}

    by_ip = candidates()
    while len(by_ip) < args.nodes and time.time() < deadline:
        time.sleep(0.5)
        by_ip = candidates()
    if len(by_ip) < args.nodes:
        out["error"] = "only %d of %d worker nodes alive in Ray after %ss" % (len(by_ip), args.nodes, args.wait)
        print(json.dumps(out), flush=True)
        return 1
    ok = True
    nodes = []
    for ip in sorted(by_ip)[: args.nodes]:
        try:
            n, took, got = first_task(ip, deadline, args.task_timeout)
            nodes.append(n)
            rec = {
                "ip": ip,
                "node_name": n.get("NodeName", ""),
                "first_task_s": round(took, 3),
                "started_after_s": got["started_after_s"],
                "ran_on_this_node": got["node_id"] == n["NodeID"],
                "labels": {k: v for k, v in (n.get("Labels") or {}).items() if not k.startswith("ray.io/")},
            }
            ok = ok and rec["ran_on_this_node"]
        except Exception as e:  # a task that never runs is the finding
            rec = {"ip": ip, "error": "%s: %s" % (type(e).__name__, e)}
            ok = False
        out["nodes"].append(rec)
    if len(nodes) >= 2 and ok:
        a, b = nodes[0], nodes[1]
        start = time.time()
        try:
            ref = make_blob.options(scheduling_strategy=pinned(a["NodeID"])).remote(OBJECT_BYTES)
            got = ray.get(read_blob.options(scheduling_strategy=pinned(b["NodeID"])).remote([ref]), timeout=args.task_timeout)
            want = hashlib.sha256(blob_bytes(OBJECT_BYTES)).hexdigest()
            obj = {
                "from": a["NodeManagerAddress"],
                "to": b["NodeManagerAddress"],
                "bytes": got["bytes"],
                "intact": got["sha256"] == want,
                "read_on_reader": got["node_id"] == b["NodeID"],
                "fetch_s": got["fetch_s"],
                "total_s": round(time.time() - start, 3),
            }
            ok = ok and obj["intact"] and obj["read_on_reader"] and obj["bytes"] == OBJECT_BYTES
        except Exception as e:
            obj = {"error": "%s: %s" % (type(e).__name__, e)}
            ok = False
        out["object"] = obj
    out["ok"] = ok
    print(json.dumps(out), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
