"""One torch.distributed rank, set up as Ray Train's TorchTrainer sets up
gloo (tcp:// init at the first rank's node IP and a kernel-picked port).
argv: rank world addr:port mode [marker]
mode: "ops"   all_reduce, broadcast, broadcast_object_list(marker), new_group
      "die"   rank 1 exits mid-job; rank 0 waits in an all_reduce
      "bench" one 64 MiB all_reduce, timed (after a warm-up)
      "hold"  all_reduce, then the listeners stay open for HOLD_S seconds
Prints one JSON line."""
import datetime, json, os, sys, time
import torch
import torch.distributed as dist

rank, world, addr, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
marker = sys.argv[5] if len(sys.argv) > 5 else ""
out = {"rank": rank}
t0 = time.time()
try:
    dist.init_process_group("gloo", init_method="tcp://" + addr, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=int(os.environ.get("RANK_TIMEOUT_S", "30"))))
    out["init_s"] = round(time.time() - t0, 3)
    if mode == "ops":
        x = torch.ones(4) * (rank + 1)
        dist.all_reduce(x)
        out["all_reduce"] = x.tolist()
        y = torch.arange(3.0) if rank == 0 else torch.zeros(3)
        dist.broadcast(y, src=0)
        out["broadcast"] = y.tolist()
        objs = [{"marker": marker}] if rank == 0 else [None]
        dist.broadcast_object_list(objs, src=0)
        out["object"] = objs[0]
        g = dist.new_group(list(range(world)))
        z = torch.ones(2)
        dist.all_reduce(z, group=g)
        out["group"] = z.tolist()
    elif mode == "die":
        dist.barrier()
        if rank == 1:
            time.sleep(1)
            os._exit(3)
        t1 = time.time()
        try:
            dist.all_reduce(torch.ones(4))
            out["error"] = None
        except Exception as e:
            out["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        out["failed_after_s"] = round(time.time() - t1, 2)
    elif mode == "hold":
        x = torch.ones(4)
        dist.all_reduce(x)
        out["all_reduce"] = x.tolist()
        time.sleep(float(os.environ.get("HOLD_S", "8")))
        dist.barrier()
    elif mode == "bench":
        big = torch.ones(16 << 20)  # 64 MiB of float32
        dist.all_reduce(big)  # warm-up: the pairs' buffers
        times = []
        for _ in range(3):
            dist.barrier()
            t1 = time.time()
            dist.all_reduce(big)
            times.append(time.time() - t1)
        out["seconds"] = sorted(times)[1]
    out["ok"] = True
except Exception as e:
    out["ok"] = False
    out["exception"] = "%s: %s" % (type(e).__name__, str(e)[:500])
print(json.dumps(out), flush=True)
