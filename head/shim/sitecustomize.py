"""rayvast shim (docs/protocol.md §9): Ray behind a NAT whose public IP is on no
interface of this container (vast.ai).

Ray binds and connects to --node-ip-address, the public IP. Here that IP is
not local: binds fail (EADDRNOTAVAIL) and connects need the host to loop
traffic back. This file, first on Ray's PYTHONPATH, rewrites them:

- in the `ray start` process it learns the node IP, the node's own ports
  (from the argv) and the container's own IP (a UDP socket connected toward
  the head, getsockname: no packet is sent); if the node IP is local it does
  nothing at all;
- it passes that to Ray's children in NAT_SHIM (IPs and ports only) and puts
  its native library (for C/C++ bind/connect) in their LD_PRELOAD where it
  can load;
- in every Python process with NAT_SHIM, bind/connect/connect_ex on the node
  IP (or ::ffff:node IP) go to the container's IP: binds always, connects
  only on the node's own ports (another rental behind the same IP owns the
  others). Never 0.0.0.0: the dashboard agent binds 127.0.0.1 on the same
  port next;
- two doors go to loopback (NAT_SHIM_LOOPBACK): Ray's metrics export port
  (bound on every address: plain-HTTP Prometheus metrics) and the dashboard
  agent's HTTP port (its job agent starts processes; Ray 2.52 asks no token
  there). vast's port forward would let anyone in. Binds on them to any
  address but loopback go to 127.0.0.2 (loopback, and not 127.0.0.1, which
  the dashboard agent binds on the same port next), and so do connects to
  the node IP on them. Python only: both servers are Python.

Then it runs the image's own sitecustomize, if there is one.
Standard library only, Python 3.8 or newer.
"""

import os
import sys

ENV = "NAT_SHIM"
LOOPBACK_ENV = "NAT_SHIM_LOOPBACK"
# The agent's mesh (agent/mesh), set by the agent in Ray's environment; the
# native layer asks it about connects to other nodes.
MESH_ENV = "NAT_SHIM_MESH"
# The native libraries (base64 ELF, one per architecture), set by head/shim
# when it assembles this file.
NATIVE = ()  # rayvast:native

PORT_FLAGS = (
    "node-manager-port",
    "object-manager-port",
    "runtime-env-agent-port",
    "dashboard-agent-grpc-port",
    "dashboard-agent-listen-port",
    "metrics-export-port",
)


def say(msg):
    sys.stderr.write("rayvast shim: %s\n" % msg)


def ray_start_args(argv):
    """The arguments after `start` when argv is `ray start` (python -m
    ray.scripts.scripts start, or the `ray` console script), else None."""
    for i in range(1, len(argv) - 1):
        if argv[i + 1] != "start":
            continue
        if argv[i] == "ray.scripts.scripts" and argv[i - 1] == "-m":
            return argv[i + 2:]
        if os.path.basename(argv[i]) == "ray":
            return argv[i + 2:]
    return None


def flags(args):
    """--name=value and --name value pairs of args."""
    out = {}
    for i, a in enumerate(args):
        if not a.startswith("--"):
            continue
        name, eq, value = a[2:].partition("=")
        if not eq:
            nxt = args[i + 1] if i + 1 < len(args) else ""
            value = "" if nxt.startswith("--") else nxt
        out[name] = value
    return out


def node_ports(f):
    """The node's own ports, as NAT_SHIM's comma-separated list."""
    ports = []
    for name in PORT_FLAGS:
        v = f.get(name, "")
        if v.isdigit() and 0 < int(v) < 65536:
            ports.append(v)
    for v in f.get("worker-port-list", "").split(","):
        if v.strip().isdigit() and 0 < int(v) < 65536:
            ports.append(v.strip())
    lo, hi = f.get("min-worker-port", ""), f.get("max-worker-port", "")
    if not f.get("worker-port-list") and lo.isdigit() and hi.isdigit() and 0 < int(lo) <= int(hi) < 65536:
        ports.append("%s-%s" % (lo, hi))
    return ",".join(ports)


# Ports that only the node itself needs: loopback only, at LOOPBACK.
LOOPBACK_FLAGS = ("metrics-export-port", "dashboard-agent-listen-port")
LOOPBACK = "127.0.0.2"


def loopback_ports(f):
    """NAT_SHIM_LOOPBACK's value: the ports of LOOPBACK_FLAGS, comma-separated."""
    return ",".join(v for v in (f.get(n, "") for n in LOOPBACK_FLAGS) if v.isdigit() and 0 < int(v) < 65536)


def parse_loopback(value):
    """The set of ports in NAT_SHIM_LOOPBACK's value (empty when malformed)."""
    ports = set()
    for p in (value or "").split(","):
        if not p.isdigit() or not 0 < int(p) < 65536:
            return set()
        ports.add(int(p))
    return ports


def is_ipv4(s):
    import socket
    try:
        return socket.inet_pton(socket.AF_INET, s) is not None
    except (OSError, ValueError, TypeError):
        return False


def container_ip(toward):
    """The source address this container uses toward host `toward`."""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((toward, 9))  # UDP: sets the peer, sends nothing
        return s.getsockname()[0]
    finally:
        s.close()


def is_local(ip):
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((ip, 0))
        return True
    except OSError:
        return False
    finally:
        s.close()


def plan(args):
    """NAT_SHIM's value for a `ray start` with args, or None (nothing to do)."""
    f = flags(args)
    node = f.get("node-ip-address", "")
    if not is_ipv4(node) or is_local(node):
        return None
    head = f.get("address", "").rpartition(":")[0].strip("[]")
    mine, err = None, None
    for toward in (head, node):  # the head's host may be IPv6 or unresolvable
        try:
            mine = container_ip(toward) if toward else None
        except OSError as e:
            err = e
        if mine:
            break
    if not mine:
        say("node IP %s is not local, but no route toward %s (%s): shim off" % (node, head or node, err))
        return None
    if not is_ipv4(mine) or mine == node:
        return None
    return "%s %s %s" % (node, mine, node_ports(f) or "0")


def parse(value):
    """(node IP, container IP, set of own ports) from NAT_SHIM, or None."""
    parts = (value or "").split(" ")
    if len(parts) != 3 or not is_ipv4(parts[0]) or not is_ipv4(parts[1]):
        return None
    own = set()
    for p in parts[2].split(","):
        lo, _, hi = p.partition("-")
        if lo.isdigit() and (hi or lo).isdigit():
            own.update(range(int(lo), int(hi or lo) + 1))
    return parts[0], parts[1], own


def is_loopback(host):
    """127.0.0.0/8, ::1, ::ffff:127.x, or "localhost"."""
    h = host[7:] if host.startswith("::ffff:") else host
    return h == "localhost" or h == "::1" or h.startswith("127.")


def install(node, mine, own, loopback=frozenset(), mesh=False):
    """Patch socket.socket so binds and own-port connects to node go to mine
    (with the agent's mesh, connects on every port: a rank dials its own
    TCPStore at the node IP), and binds and node-IP connects on a loopback
    port go to LOOPBACK."""
    import socket
    mapped_node, mapped_mine = "::ffff:" + node, "::ffff:" + mine
    node6 = socket.inet_pton(socket.AF_INET6, mapped_node)

    def rewrite(sock, address, bind):
        if not isinstance(address, tuple) or len(address) < 2 or not isinstance(address[0], str):
            return address
        host, port = address[0], address[1]
        if port in loopback and not is_loopback(host) and (bind or host in (node, mine, mapped_node, mapped_mine)):
            if sock.family == socket.AF_INET:
                return (LOOPBACK,) + address[1:]
            if sock.family == socket.AF_INET6:
                return ("::ffff:" + LOOPBACK,) + address[1:]
        if not bind and port not in own and not mesh:
            return address
        if sock.family == socket.AF_INET and host == node:
            return (mine,) + address[1:]
        if sock.family == socket.AF_INET6 and ":" in host:
            try:
                if socket.inet_pton(socket.AF_INET6, host) == node6:
                    return (mapped_mine,) + address[1:]
            except OSError:
                pass
        return address

    cls = socket.socket
    orig_bind, orig_connect, orig_connect_ex = cls.bind, cls.connect, cls.connect_ex

    def bind(self, address):
        return orig_bind(self, rewrite(self, address, True))

    def connect(self, address):
        return orig_connect(self, rewrite(self, address, False))

    def connect_ex(self, address):
        return orig_connect_ex(self, rewrite(self, address, False))

    cls.bind, cls.connect, cls.connect_ex = bind, connect, connect_ex
    return rewrite


def elf_kind(head):
    """(class, data, machine) of an ELF header, or None."""
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    order = "little" if head[5] == 1 else "big"
    return head[4], head[5], int.from_bytes(head[18:20], order)


def native_lib():
    """(library bytes, None) for this process's loader, or (None, why not)."""
    if not NATIVE:
        return None, "this shim carries no native library"
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        libc = ""
    if not libc.startswith("glibc "):
        return None, "the C library is not glibc (musl?)"
    try:
        with open("/proc/self/exe", "rb") as f:
            mine = elf_kind(f.read(64))
    except OSError as e:
        return None, "cannot read /proc/self/exe: %s" % e
    import binascii
    for b64 in NATIVE:
        lib = binascii.a2b_base64(b64)
        if elf_kind(lib[:64]) == mine:
            return lib, None
    return None, "no native library for this machine (ELF %s)" % (mine,)


def lib_dir(args):
    """A fresh private (0700) dir, not on a noexec mount, for the library.
    (tempfile and shutil would cost Ray's start more than all the rest.)"""
    for base in (flags(args).get("temp-dir", ""), os.path.dirname(os.path.abspath(__file__)),
                 os.environ.get("TMPDIR", ""), "/tmp", "/dev/shm"):
        if not base:
            continue
        d = os.path.join(base, "natshim-" + os.urandom(6).hex())
        try:
            if os.statvfs(base).f_flag & os.ST_NOEXEC:
                continue
            os.mkdir(d, 0o700)
            return d
        except OSError:
            continue
    return None


def remove(d, path):
    for f in (lambda: os.unlink(path), lambda: os.rmdir(d)):
        try:
            f()
        except OSError:
            pass


def preload(args):
    """Put the native library in LD_PRELOAD of Ray's children; the reason when not."""
    lib, why = native_lib()
    if lib is None:
        return why
    d = lib_dir(args)
    if d is None:
        return "no writable directory that allows exec"
    path = os.path.join(d, "natshim.so")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o500)
    with os.fdopen(fd, "wb") as f:
        f.write(lib)
    import atexit
    atexit.register(remove, d, path)
    old = os.environ.get("LD_PRELOAD", "")
    os.environ["LD_PRELOAD"] = path + (":" + old if old else "")
    return None


def ray_start(args):
    """Learn, tell Ray's children, and return NAT_SHIM's value (None: the
    node IP is local, nothing to do)."""
    value = plan(args)
    if value is None:
        return None
    os.environ[ENV] = value
    lo = loopback_ports(flags(args))
    if lo:
        os.environ[LOOPBACK_ENV] = lo
    node, mine = value.split(" ")[:2]
    try:
        why = preload(args)
    except OSError as e:
        why = "cannot write it: %s" % e
    if why:
        say("node IP %s is on no interface: rewriting to %s in Python only; native layer off: %s "
            "(C/C++ connects to the node IP then rely on hairpin NAT)" % (node, mine, why))
    else:
        say("node IP %s is on no interface: rewriting to %s (Python and native)" % (node, mine))
    return value


def chain_load():
    """Run the image's own sitecustomize, which this file shadows. Copies of
    this file further on the path are skipped (they would load each other)."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.realpath(__file__))
    for entry in sys.path:
        if os.path.realpath(entry or ".") == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is None or spec.loader is None:
            continue
        try:
            with open(spec.origin, "rb") as f:
                if b"# rayvast:native" in f.read():
                    continue
        except (OSError, TypeError):
            pass
        try:
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except Exception as e:  # as site.py does: report, keep going
            sys.stderr.write("Error in sitecustomize (%s); set PYTHONVERBOSE for traceback:\n%s: %s\n"
                             % (spec.origin, type(e).__name__, e))
            return None
        return mod
    return None


def main():
    try:
        try:
            with open("/proc/self/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0")[:-1]]
        except OSError:
            argv = []  # no /proc: not knowable, so not `ray start`
        args = ray_start_args(argv)
        value = ray_start(args) if args is not None else os.environ.get(ENV)
        rules = parse(value)
        if rules is not None:
            install(*rules, loopback=frozenset(parse_loopback(os.environ.get(LOOPBACK_ENV))),
                    mesh=bool(os.environ.get(MESH_ENV)))
    except Exception as e:  # never break the interpreter's start
        say("off after an error: %s: %s" % (type(e).__name__, e))


main()
try:
    image_sitecustomize = chain_load()
except Exception as e:
    say("cannot look for the image's sitecustomize: %s: %s" % (type(e).__name__, e))
