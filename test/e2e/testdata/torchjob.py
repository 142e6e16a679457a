"""Training on a rayvast cluster, through real Ray: torch.distributed (gloo)
set up as Ray Train's TorchTrainer sets it up (rank 0's
ray.util.get_node_ip_address() and a port the kernel picks, as
ray/train/_internal/utils.py get_address_and_port does; ray.train itself
needs pyarrow, which this machine lacks), and Ray's own ray.util.collective
with backend "gloo" (its rendezvous through Ray's KV store).
argv: marker [nccl]
Cases: "one node" (two ranks on the first node), "two nodes" (a rank on
each), "collective" (ray.util.collective, a rank on each). With "nccl"
(GPU nodes; not run here, there is no GPU): "two nodes" only, backend
nccl, a GPU per rank and the tensors on it. The driver
runs on the head's machine, whose Ray has no torch: torch is imported in
the actors only. Prints one line: TORCHJOB {json}."""
import json, sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

marker = sys.argv[1]
backend = sys.argv[2] if len(sys.argv) > 2 else "gloo"


def host_addr():
    """What the rank's hostname resolves to, where gloo looks first when no
    interface is named: the hostname shape the test set up."""
    import socket
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError as e:
        return "%s: %s" % (type(e).__name__, e)


@ray.remote(num_cpus=1)
class Rank:
    def addr(self):
        import socket
        s = socket.socket()
        s.bind(("", 0))
        port = s.getsockname()[1]
        s.close()
        return ray.util.get_node_ip_address(), port

    def run(self, rank, world, addr, port, marker):
        import datetime
        import torch
        import torch.distributed as dist
        out = {"rank": rank, "node_ip": ray.util.get_node_ip_address(), "host_addr": host_addr()}
        try:
            dist.init_process_group(backend, init_method="tcp://%s:%d" % (addr, port), rank=rank,
                                    world_size=world, timeout=datetime.timedelta(seconds=60))
            dev = "cuda" if backend == "nccl" else "cpu"
            x = torch.ones(4, device=dev) * (rank + 1)
            dist.all_reduce(x)
            out["all_reduce"] = x.tolist()
            objs = [{"marker": marker}] if rank == 0 else [None]
            dist.broadcast_object_list(objs, src=0)
            out["object"] = objs[0]
            g = dist.new_group(list(range(world)))
            z = torch.ones(2, device=dev)
            dist.all_reduce(z, group=g)
            out["group"] = z.tolist()
            out["ok"] = True
        except Exception as e:
            out["ok"], out["error"] = False, "%s: %s" % (type(e).__name__, str(e)[:400])
        return out

    def collective(self, rank, world, group):
        import torch
        import ray.util.collective as col
        out = {"rank": rank, "node_ip": ray.util.get_node_ip_address(), "host_addr": host_addr()}
        try:
            col.init_collective_group(world, rank, backend="gloo", group_name=group, gloo_timeout=60000)
            t = torch.ones(4) * (rank + 1)
            col.allreduce(t, group_name=group)
            out["all_reduce"] = t.tolist()
            out["ok"] = True
        except Exception as e:
            out["ok"], out["error"] = False, "%s: %s" % (type(e).__name__, str(e)[:400])
        return out


def ranks_on(node_ids):
    gpus = 1 if backend == "nccl" else 0
    return [Rank.options(num_gpus=gpus, scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
            for n in node_ids]


def torch_case(node_ids):
    ranks = ranks_on(node_ids)
    addr, port = ray.get(ranks[0].addr.remote())
    t0 = time.time()
    res = ray.get([r.run.remote(i, len(ranks), addr, port, marker) for i, r in enumerate(ranks)], timeout=180)
    for r in ranks:
        ray.kill(r)
    return {"ranks": res, "rendezvous": "%s:%d" % (addr, port), "seconds": round(time.time() - t0, 2)}


def collective_case(node_ids):
    ranks = ranks_on(node_ids)
    t0 = time.time()
    # A group name of this run's own: rank 0 publishes its address in Ray's
    # KV store under the name, and a rank of a later run on the same
    # cluster would otherwise read this run's stale address.
    group = "rv-" + marker
    res = ray.get([r.collective.remote(i, len(ranks), group) for i, r in enumerate(ranks)], timeout=180)
    for r in ranks:
        ray.kill(r)
    return {"ranks": res, "seconds": round(time.time() - t0, 2)}


ray.init()
nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU"))
out = {"nodes": len(nodes)}
if len(nodes) >= 2 and backend == "nccl":
    out["two nodes"] = torch_case(nodes[:2])
elif len(nodes) >= 2:
    out["one node"] = torch_case([nodes[0], nodes[0]])
    out["two nodes"] = torch_case(nodes[:2])
    out["collective"] = collective_case(nodes[:2])
print("TORCHJOB " + json.dumps(out), flush=True)
