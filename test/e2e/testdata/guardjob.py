"""Listeners opened inside a Ray actor, for the co-tenant check of
guard_test.go (issue 41). argv: gate-file
An actor pinned to the first worker node opens, outside the node's 64:
- "tcpstore": torch.distributed.TCPStore("0.0.0.0", port, 2, True), the
  port found as Ray Train finds one (bind port 0, read it, close): C++;
- "python4": a Python listener on 0.0.0.0 (socket.accept: accept4);
- "python6": a Python dual-stack listener on "::";
- "control": a listener made and served by raw syscalls (ctypes
  syscall(2)), which no LD_PRELOAD library sees: the test's proof that the
  co-tenant's path to the actor is there.
The Python listeners and the control write "hi <peer>" to each connection
they accept and note the peer. Before it answers, the actor dials its own
listeners at the container's address (the node's own ranks do that): they
must serve it. The driver (on the head's machine) prints GUARD {json},
waits for the gate file, then prints GUARDDONE {json} with the peers each
listener accepted."""
import json, os, sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

gate = sys.argv[1]


@ray.remote(num_cpus=1)
class Listeners:
    def open(self):
        import ctypes, datetime, socket, struct, threading
        import torch.distributed as dist
        self.seen = {"python4": [], "python6": [], "control": []}
        private = os.environ.get("NAT_SHIM", "").split(" ")[1]
        s = socket.socket()
        s.bind(("", 0))
        port = s.getsockname()[1]
        s.close()
        self.store = dist.TCPStore("0.0.0.0", port, 2, True, timeout=datetime.timedelta(seconds=120),
                                   wait_for_workers=False)
        ports = {"tcpstore": port}

        def serve(name, accept):
            def loop():
                while True:
                    c, who = accept()
                    self.seen[name].append(who)
                    c.sendall(("hi %s\n" % who).encode())
                    c.close()
            threading.Thread(target=loop, daemon=True).start()

        for name, fam, host in (("python4", socket.AF_INET, "0.0.0.0"), ("python6", socket.AF_INET6, "::")):
            l = socket.socket(fam, socket.SOCK_STREAM)
            if fam == socket.AF_INET6:
                l.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            l.bind((host, 0))
            l.listen(16)
            ports[name] = l.getsockname()[1]
            serve(name, lambda l=l: (lambda c, a: (c, a[0]))(*l.accept()))

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        SYS_socket, SYS_bind, SYS_listen, SYS_accept4 = 41, 49, 50, 288  # x86_64
        fd = libc.syscall(SYS_socket, socket.AF_INET, socket.SOCK_STREAM, 0)
        sin = struct.pack("=H", socket.AF_INET) + bytes(14)  # 0.0.0.0, port 0
        if fd < 0 or libc.syscall(SYS_bind, fd, sin, len(sin)) != 0 or libc.syscall(SYS_listen, fd, 16) != 0:
            raise OSError(ctypes.get_errno(), "control listener")
        ctl = socket.socket(fileno=os.dup(fd))  # for getsockname only
        ports["control"] = ctl.getsockname()[1]

        def raw_accept():
            buf = ctypes.create_string_buffer(16)
            ln = ctypes.c_uint(16)
            c = libc.syscall(SYS_accept4, fd, buf, ctypes.byref(ln), 0)
            return socket.socket(fileno=c), socket.inet_ntoa(buf.raw[4:8])
        serve("control", raw_accept)

        local = {}
        for name in ("python4", "python6", "control"):
            try:
                with socket.create_connection((private, ports[name]), timeout=5) as c:
                    local[name] = c.makefile().readline().strip()
            except OSError as e:
                local[name] = "%s: %s" % (type(e).__name__, e)
        return {"node_ip": ray.util.get_node_ip_address(), "private": private, "ports": ports,
                "local": local, "preload": os.environ.get("LD_PRELOAD", "")}

    def seen_peers(self):
        return self.seen


ray.init()
workers = [n for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] != ray.util.get_node_ip_address()]
workers.sort(key=lambda n: n["NodeManagerAddress"])
a = Listeners.options(scheduling_strategy=NodeAffinitySchedulingStrategy(workers[0]["NodeID"], soft=False)).remote()
print("GUARD " + json.dumps(ray.get(a.open.remote(), timeout=180)), flush=True)
deadline = time.time() + 300
while not os.path.exists(gate) and time.time() < deadline:
    time.sleep(0.2)
print("GUARDDONE " + json.dumps(ray.get(a.seen_peers.remote(), timeout=60)), flush=True)
