"""Unit tests of the shim's Python layer (run by python_test.go).

SHIM_DIR holds the assembled sitecustomize.py with the native library,
SHIM_DIR_NOLIB the same without it, MINIRAY the stand-in ray package.
Nothing here sends a packet: connects that keep the node IP are UDP."""
import ast
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

SHIM = os.environ["SHIM_DIR"]
NOLIB = os.environ["SHIM_DIR_NOLIB"]
MINIRAY = os.environ["MINIRAY"]
NODE = "203.0.113.7"  # TEST-NET: on no interface here

sys.path.insert(0, SHIM)
import sitecustomize as shim  # noqa: E402  (the interpreter already loaded it: same module)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def python(code, shim_dir=SHIM, env=None, extra_path=()):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    e.update(env or {})
    e["PYTHONPATH"] = ":".join([shim_dir] + list(extra_path))
    return subprocess.run([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=30)


def ray_start(node, ports, shim_dir=SHIM, env=None):
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--address=127.0.0.1:6379",
            "--node-ip-address=" + node, "--node-manager-port=%d" % ports[0],
            "--object-manager-port", str(ports[1]), "--runtime-env-agent-port=%d" % ports[2],
            "--dashboard-agent-grpc-port=%d" % ports[3], "--dashboard-agent-listen-port=%d" % ports[4],
            "--metrics-export-port=%d" % ports[5], "--worker-port-list=%d,%d" % (ports[6], ports[7]),
            "--num-gpus=0", "--resources={}"]
    e = dict(env or {})
    # LC_CTYPE set: else Python's locale coercion (PEP 538) adds it.
    e.update({"PATH": os.environ.get("PATH", ""), "PYTHONPATH": shim_dir + ":" + MINIRAY, "MINIRAY_MODE": "dump",
              "LC_CTYPE": "C.UTF-8"})
    p = subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("ray start exited %d: %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout), p.stderr, e


class Parsing(unittest.TestCase):
    def test_python38_syntax(self):
        with open(os.path.join(SHIM, "sitecustomize.py")) as f:
            ast.parse(f.read(), feature_version=(3, 8))

    def test_ray_start_args(self):
        cases = [
            (["/usr/bin/python3", "-m", "ray.scripts.scripts", "start", "--block", "--x=1"], ["--block", "--x=1"]),
            (["python", "/opt/venv/bin/ray", "start", "--address=a:1"], ["--address=a:1"]),
            (["python", "-m", "ray.scripts.scripts", "stop"], None),
            (["python", "-m", "ray._private.workers.default_worker", "start"], None),
            (["python", "-c", "start"], None),
            (["python", "ray.scripts.scripts", "start"], None),  # a file, not -m
            (["raylet"], None),
        ]
        for argv, want in cases:
            self.assertEqual(shim.ray_start_args(argv), want, argv)

    def test_node_ports(self):
        f = shim.flags(["--node-manager-port=31001", "--object-manager-port", "31002",
                        "--runtime-env-agent-port=31003", "--dashboard-agent-grpc-port=31004",
                        "--dashboard-agent-listen-port=31005", "--metrics-export-port=31006",
                        "--worker-port-list=31010, 31011", "--block", "--min-worker-port=1", "--max-worker-port=9"])
        self.assertEqual(shim.node_ports(f), "31001,31002,31003,31004,31005,31006,31010,31011")
        f = shim.flags(["--node-manager-port=0", "--min-worker-port=20000", "--max-worker-port=20010"])
        self.assertEqual(shim.node_ports(f), "20000-20010")

    def test_parse(self):
        self.assertEqual(shim.parse(NODE + " 10.0.0.2 1,5-7"), (NODE, "10.0.0.2", {1, 5, 6, 7}))
        for bad in (None, "", NODE, NODE + " x 1", "a b c", NODE + " 10.0.0.2"):
            self.assertIsNone(shim.parse(bad), bad)

    def test_plan(self):
        args = ["--address=127.0.0.1:6379", "--node-manager-port=31001", "--worker-port-list=31010"]
        self.assertIsNone(shim.plan(args + ["--node-ip-address=127.0.0.1"]), "local node IP")
        self.assertIsNone(shim.plan(args + ["--node-ip-address=127.0.0.2"]), "local, not the source toward the head")
        self.assertIsNone(shim.plan(args + ["--node-ip-address=not-an-ip"]))
        self.assertIsNone(shim.plan(args))
        self.assertEqual(shim.plan(args + ["--node-ip-address=" + NODE]), NODE + " 127.0.0.1 31001,31010")
        self.assertEqual(shim.plan(["--address=127.0.0.1:6379", "--node-ip-address=" + NODE]), NODE + " 127.0.0.1 0",
                         "no known ports: binds are still rewritten")
        # The head's host unusable for an AF_INET route lookup: the route toward the node IP decides.
        try:
            want = "%s %s 0" % (NODE, shim.container_ip(NODE))
        except OSError:
            want = None  # this machine has no route toward it either
        self.assertEqual(shim.plan(["--address=[::1]:6379", "--node-ip-address=" + NODE]), want)


class Rules(unittest.TestCase):
    def test_rewrites(self):
        own, other = free_ports(2)
        code = r"""
import socket, json
out = {}
def udp(fam, host, port, fn="connect"):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    rc = getattr(s, fn)((host, port))
    return [s.getpeername()[0], rc]
def tcp_bind(fam, host, port):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.bind((host, port))
    return s.getsockname()[0]
out["own"] = udp(socket.AF_INET, "%(node)s", %(own)d)
out["own_ex"] = udp(socket.AF_INET, "%(node)s", %(own)d, "connect_ex")
out["other"] = udp(socket.AF_INET, "%(node)s", %(other)d)
out["other_ip"] = udp(socket.AF_INET, "203.0.113.8", %(own)d)
out["bind_any_port"] = tcp_bind(socket.AF_INET, "%(node)s", %(other)d)
out["v6_own"] = udp(socket.AF_INET6, "::ffff:%(node)s", %(own)d)
out["v6_hex_own"] = udp(socket.AF_INET6, "::ffff:cb00:7107", %(own)d)
out["v6_other"] = udp(socket.AF_INET6, "::ffff:%(node)s", %(other)d)
out["v6_bind"] = tcp_bind(socket.AF_INET6, "::ffff:%(node)s", 0)
print(json.dumps(out))
""" % {"node": NODE, "own": own, "other": other}
        p = python(code, env={"NAT_SHIM": "%s 127.0.0.1 %d" % (NODE, own)})
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        want = {
            "own": ["127.0.0.1", None], "own_ex": ["127.0.0.1", 0], "other": [NODE, None],
            "other_ip": ["203.0.113.8", None], "bind_any_port": "127.0.0.1",
            "v6_own": ["::ffff:127.0.0.1", None], "v6_hex_own": ["::ffff:127.0.0.1", None],
            "v6_other": ["::ffff:" + NODE, None], "v6_bind": "::ffff:127.0.0.1",
        }
        self.assertEqual(got, want)
        # With the agent's mesh, connects to the node IP on every port go to
        # the container's IP (a rank dials its own TCPStore at the node IP).
        p = python(code, env={"NAT_SHIM": "%s 127.0.0.1 %d" % (NODE, own), "NAT_SHIM_MESH": "127.0.0.1:9"})
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        want["other"], want["v6_other"] = ["127.0.0.1", None], ["::ffff:127.0.0.1", None]
        self.assertEqual(got, want)

    def test_loopback_port(self):
        """A loopback port (Ray's metrics export, the dashboard agent's HTTP):
        binds on any address but loopback, and connects to the node IP, go to
        127.0.0.2, where vast's port forward cannot reach them; a bind on
        127.0.0.1 (the dashboard agent's second) stays; other ports are
        untouched; without NAT_SHIM nothing changes."""
        own, metrics, other = free_ports(3)
        code = r"""
import socket, json
out = {}
def tcp_bind(fam, host, port):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    name = s.getsockname()[0]
    s.close()
    return name
def udp(fam, host, port):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.connect((host, port))
    return s.getpeername()[0]
out["any"] = tcp_bind(socket.AF_INET, "", %(metrics)d)
out["zero"] = tcp_bind(socket.AF_INET, "0.0.0.0", %(metrics)d)
out["node"] = tcp_bind(socket.AF_INET, "%(node)s", %(metrics)d)
out["v6_any"] = tcp_bind(socket.AF_INET6, "::", %(metrics)d)
out["connect_node"] = udp(socket.AF_INET, "%(node)s", %(metrics)d)
out["lo"] = tcp_bind(socket.AF_INET, "127.0.0.1", %(metrics)d)
out["other_any"] = tcp_bind(socket.AF_INET, "", %(other)d)
print(json.dumps(out))
""" % {"node": NODE, "metrics": metrics, "other": other}
        env = {"NAT_SHIM": "%s 127.0.0.1 %d,%d" % (NODE, own, metrics), "NAT_SHIM_LOOPBACK": str(metrics)}
        p = python(code, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), {"any": "127.0.0.2", "zero": "127.0.0.2", "node": "127.0.0.2",
                                                "v6_any": "::ffff:127.0.0.2", "connect_node": "127.0.0.2",
                                                "lo": "127.0.0.1", "other_any": "0.0.0.0"})
        p = python(code.replace(', "%s"' % NODE, ', "127.0.0.1"'), env={"NAT_SHIM_LOOPBACK": str(metrics)})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["any"], "0.0.0.0", "NAT_SHIM_LOOPBACK alone changes nothing")
        self.assertEqual(shim.parse_loopback("20005,20006"), {20005, 20006})
        for bad in ("", "x", "0", "70000", "1,,2"):
            self.assertEqual(shim.parse_loopback(bad), set(), bad)

    def test_without_rules_nothing_changes(self):
        code = "import socket; s = socket.socket(); s.bind(('%s', 0))" % NODE
        for env in ({}, {"NAT_SHIM": "garbage"}):
            p = python(code, env=env)
            self.assertNotEqual(p.returncode, 0, env)
            self.assertIn("Cannot assign requested address", p.stderr, env)


class RayStart(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.secret = base64.b16encode(os.urandom(16)).decode()
        self.token = os.path.join(self.tmp, "cluster_token")
        with open(self.token, "w") as f:
            f.write(self.secret + "\n")
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": self.token, "LD_PRELOAD": "libm.so.6"}

    def test_nat_learns_and_tells_children(self):
        ports = free_ports(8)
        got, stderr, given = ray_start(NODE, ports, env=self.env)
        env = got["env"]
        added = {k: v for k, v in env.items() if given.get(k) != v}
        self.assertEqual(sorted(added), ["LD_PRELOAD", "NAT_SHIM", "NAT_SHIM_LOOPBACK"], added)
        self.assertEqual(env["NAT_SHIM"], "%s 127.0.0.1 %s" % (NODE, ",".join(map(str, ports))))
        self.assertEqual(env["NAT_SHIM_LOOPBACK"], "%d,%d" % (ports[5], ports[4]), "metrics export, dashboard agent HTTP")
        lib = env["LD_PRELOAD"].split(":")
        self.assertEqual(lib[1:], ["libm.so.6"], "the image's LD_PRELOAD is kept, after ours")
        self.assertEqual([(p["path"], p["dir_mode"], p["elf"]) for p in got["preload"]], [(lib[0], "0o700", True)])
        self.assertTrue(got["patched"])
        self.assertIn("rewriting to 127.0.0.1 (Python and native)", stderr)
        for k, v in env.items():
            self.assertFalse(k.startswith("RAYVAST_"), k)
            self.assertNotIn(self.secret, v, k)
        self.assertFalse(os.path.exists(lib[0]), "the private library dir outlives ray start")

    def test_local_node_ip_does_nothing(self):
        got, stderr, given = ray_start("127.0.0.2", free_ports(8), env=self.env)  # local, on lo
        self.assertEqual(got["env"], given)
        self.assertEqual(got["preload"], [])
        self.assertFalse(got["patched"])
        self.assertEqual(stderr, "")

    def test_without_native_the_python_layer_works_and_says_so(self):
        got, stderr, _ = ray_start(NODE, free_ports(8), shim_dir=NOLIB)
        self.assertNotIn("LD_PRELOAD", got["env"])
        self.assertIn("NAT_SHIM", got["env"])
        self.assertTrue(got["patched"])
        self.assertIn("in Python only; native layer off: this shim carries no native library", stderr)


class NativeCheck(unittest.TestCase):
    def setUp(self):
        self.saved = shim.NATIVE, os.confstr

    def tearDown(self):
        shim.NATIVE, os.confstr = self.saved

    def test_glibc_and_matching_elf_load(self):
        lib, why = shim.native_lib()
        self.assertIsNone(why)
        self.assertEqual(lib[:4], b"\x7fELF")

    def test_musl_is_refused(self):
        def musl(name):
            raise ValueError("unrecognized configuration name")
        os.confstr = musl
        self.assertEqual(shim.native_lib(), (None, "the C library is not glibc (musl?)"))

    def test_other_machine_is_refused(self):
        other = bytearray(base64.b64decode("".join(shim.NATIVE[0])))
        other[18:20] = (183).to_bytes(2, "little")  # EM_AARCH64 (or x86-64's 62 on arm)
        with open("/proc/self/exe", "rb") as f:
            mine = shim.elf_kind(f.read(64))
        if shim.elf_kind(bytes(other[:64])) == mine:
            other[18:20] = (62).to_bytes(2, "little")
        shim.NATIVE = (base64.b64encode(bytes(other)).decode(),)
        lib, why = shim.native_lib()
        self.assertIsNone(lib)
        self.assertIn("no native library for this machine", why)


class ChainLoad(unittest.TestCase):
    def image(self, body):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write(body)
        return d

    def test_image_sitecustomize_runs_once(self):
        d = self.image("import sys\nMARK = 'image'\nsys.stdout.write('ran\\n')\n")
        p = python("import sitecustomize as s; print(s.image_sitecustomize.MARK)", extra_path=[d])
        self.assertEqual((p.returncode, p.stdout), (0, "ran\nimage\n"), p.stderr)

    def test_failing_image_sitecustomize_is_reported_and_rules_hold(self):
        d = self.image("raise RuntimeError('boom')\n")
        code = "import socket; s = socket.socket(); s.bind(('%s', 0)); print(s.getsockname()[0])" % NODE
        p = python(code, env={"NAT_SHIM": NODE + " 127.0.0.1 1"}, extra_path=[d])
        self.assertEqual((p.returncode, p.stdout), (0, "127.0.0.1\n"), p.stderr)
        self.assertIn("Error in sitecustomize", p.stderr)
        self.assertIn("RuntimeError: boom", p.stderr)

    def test_copies_of_the_shim_are_skipped(self):
        with open(os.path.join(SHIM, "sitecustomize.py")) as f:
            copy = self.image(f.read())
        image = self.image("MARK = 'image'\n")
        p = python("import sitecustomize as s; print(s.image_sitecustomize.MARK)", extra_path=[copy, image])
        self.assertEqual((p.returncode, p.stdout), (0, "image\n"), p.stderr)

    def test_the_interpreters_own_sitecustomize(self):
        # Debian's python3 has one (/usr/lib/python3.X), pyenv's has none.
        bare = subprocess.run([sys.executable, "-c", "import sitecustomize as m; print(m.__file__)"],
                              env={"PATH": os.environ.get("PATH", "")}, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, universal_newlines=True)
        want = os.path.realpath(bare.stdout.strip()) if bare.returncode == 0 else "None"
        p = python("import os, sitecustomize as s; m = s.image_sitecustomize; "
                   "print(os.path.realpath(m.__file__) if m else None)")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, want + "\n", ""))


if __name__ == "__main__":
    unittest.main()
