"""Tests of rayvast_autoscaler against a stub of Ray's NodeProvider base class
and a tiny fake admin API on a Unix socket (the real wire: HTTP/1.1, JSON)."""

import http.server
import json
import os
import shutil
import socketserver
import sys
import tempfile
import threading
import types
import unittest

# A stub of ray.autoscaler.node_provider.NodeProvider, installed before the
# module under test imports it.
_init_calls = []


class StubNodeProvider:
    def __init__(self, provider_config, cluster_name):
        _init_calls.append((provider_config, cluster_name))
        self.provider_config = provider_config
        self.cluster_name = cluster_name


for name in ("ray", "ray.autoscaler", "ray.autoscaler.node_provider"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["ray.autoscaler.node_provider"].NodeProvider = StubNodeProvider
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rayvast_autoscaler as ra  # noqa: E402

SECRET_TOKEN = "tok-DO-NOT-LEAK-0123456789abcdefghijklmnopq"


class FakeAdmin:
    """The admin API's candidate endpoints over a dict."""

    def __init__(self):
        self.cands = {}
        self.ray = {}  # candidate_id -> its node's Ray state (GET /v1/nodes)
        self.n = 0
        self.requests = []
        self.lock = threading.Lock()

    def handle(self, method, path, body):
        with self.lock:
            self.requests.append((method, path, body))
            if method == "GET" and path == "/v1/candidates":
                return 200, sorted(self.cands.values(), key=lambda c: c["candidate_id"])
            if method == "GET" and path == "/v1/nodes":
                return 200, [{"candidate_id": cid, "ray": {"state": st}} for cid, st in sorted(self.ray.items())]
            if method == "POST" and path == "/v1/candidates":
                req = json.loads(body)
                if set(req) != {"node_type"} or req["node_type"] not in ("gpu", "cpu"):
                    return 400, {"error": "bad_request"}
                self.n += 1
                cid = "c%d" % self.n
                self.cands[cid] = {"candidate_id": cid, "node_type": req["node_type"], "state": "pending"}
                return 201, {"candidate_id": cid, "join_token": SECRET_TOKEN, "env": {"RAYVAST_JOIN_TOKEN": SECRET_TOKEN}}
            if method == "DELETE" and path.startswith("/v1/candidates/"):
                cid = path.rsplit("/", 1)[1]
                if cid not in self.cands:
                    return 404, {"error": "not_found"}
                self.cands[cid]["state"] = "ended"
                return 204, None
            if method == "PATCH" and path.startswith("/v1/candidates/"):
                cid = path.rsplit("/", 1)[1]
                req = json.loads(body)
                if cid not in self.cands:
                    return 404, {"error": "not_found"}
                if req.get("host_id") == "bad-host":
                    return 409, {"error": "host_blocklisted", "reason": "host bad-host is blocklisted (security)"}
                if any(self.cands[cid].get(k) not in (None, v) for k, v in req.items()):
                    return 409, {"error": "conflict", "reason": "already set"}
                self.cands[cid].update(req)
                if "public_ip" in req:
                    self.cands[cid]["state"] = "running"
                return 200, self.cands[cid]
            return 404, {"error": "not_found"}


def serve(admin, path):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _do(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n).decode() if n else ""
            status, out = admin.handle(self.command, self.path, body)
            data = b"" if out is None else json.dumps(out).encode()
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PATCH = _do

        def address_string(self):
            return "unix"

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    srv = Server(path, Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class ProviderTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.sock = os.path.join(self.dir, "admin.sock")
        self.admin = FakeAdmin()
        self.srv = serve(self.admin, self.sock)
        self.p = ra.RayvastNodeProvider({"type": "external", "admin_socket": self.sock}, "c1")

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()
        shutil.rmtree(self.dir, ignore_errors=True)  # one dir per test was left in /tmp

    def test_is_a_ray_node_provider(self):
        self.assertIsInstance(self.p, StubNodeProvider)
        self.assertEqual(_init_calls[-1][1], "c1")

    def test_create_list_tags_terminate(self):
        tags = {ra.TAG_RAY_NODE_KIND: "worker", ra.TAG_RAY_USER_NODE_TYPE: "gpu", "ray-launch-config": "abc"}
        created = self.p.create_node({}, tags, 2)
        self.assertEqual(sorted(created), ["c1", "c2"])
        self.assertEqual([r[0:2] for r in self.admin.requests], [("POST", "/v1/candidates")] * 2)
        self.assertEqual(json.loads(self.admin.requests[0][2]), {"node_type": "gpu"})
        self.assertNotIn(SECRET_TOKEN, repr(created) + repr(self.p.__dict__))

        self.assertEqual(self.p.non_terminated_nodes({}), ["head", "c1", "c2"])
        self.assertEqual(self.p.non_terminated_nodes({ra.TAG_RAY_NODE_KIND: "worker"}), ["c1", "c2"])
        self.assertEqual(self.p.non_terminated_nodes({ra.TAG_RAY_USER_NODE_TYPE: "gpu", "ray-launch-config": "abc"}), ["c1", "c2"])
        self.assertEqual(self.p.non_terminated_nodes({ra.TAG_RAY_USER_NODE_TYPE: "cpu"}), [])
        self.assertFalse(self.p.is_running("c1"))
        self.assertFalse(self.p.is_terminated("c1"))
        self.assertEqual(self.p.node_tags("c1")[ra.TAG_RAY_NODE_STATUS], ra.STATUS_UNINITIALIZED)

        # The head rents it and it enrolls; its Ray is still starting, so
        # Ray must see it pending (setting-up), not up-to-date: v1 would
        # end an up-to-date node that sends Ray no heartbeat for 30 s.
        self.admin.cands["c1"].update(state="enrolled", public_ip="203.0.113.7")
        self.admin.ray["c1"] = "starting"
        self.p.non_terminated_nodes({})
        self.assertTrue(self.p.is_running("c1"))
        self.assertEqual(self.p.external_ip("c1"), "203.0.113.7")
        self.assertEqual(self.p.internal_ip("c1"), "203.0.113.7")
        self.assertEqual(self.p.node_tags("c1")[ra.TAG_RAY_NODE_STATUS], ra.STATUS_SETTING_UP)
        # Its Ray joins the cluster: up-to-date.
        self.admin.ray["c1"] = "running"
        self.p.non_terminated_nodes({})
        self.assertEqual(self.p.node_tags("c1")[ra.TAG_RAY_NODE_STATUS], ra.STATUS_UP_TO_DATE)
        # Ray's stored status (it tags every new node "uninitialized") does
        # not hide what the head knows; Ray's other tags are kept.
        self.p.set_node_tags("c1", {ra.TAG_RAY_NODE_STATUS: ra.STATUS_UNINITIALIZED, "ray-launch-request": "r1"})
        self.assertEqual(self.p.node_tags("c1")[ra.TAG_RAY_NODE_STATUS], ra.STATUS_UP_TO_DATE)
        self.assertEqual(self.p.node_tags("c1")["ray-launch-request"], "r1")

        self.p.terminate_nodes(["c1", "c2", "head"])  # the head is never ended
        self.assertTrue(self.p.is_terminated("c1"))
        self.assertEqual(self.p.non_terminated_nodes({}), ["head"])
        self.assertFalse(any(r[0] == "DELETE" and r[1].endswith("/head") for r in self.admin.requests))
        self.p.terminate_node("c1")  # again: the head says 204 or 404, both fine
        self.p.terminate_node("nope")  # unknown: 404 is terminated

    def test_ip_only_once_enrolled(self):
        # A rented candidate may have the public IP of a node that just
        # ended, whose idle time Ray keeps by IP: Ray would end the new one
        # as idle at once. Its IP is told once it enrolls.
        self.admin.cands["r"] = {"candidate_id": "r", "node_type": "gpu", "state": "running", "public_ip": "203.0.113.8"}
        self.p.non_terminated_nodes({})
        self.assertIsNone(self.p.internal_ip("r"))
        self.assertIsNone(self.p.external_ip("r"))
        self.admin.cands["r"]["state"] = "enrolled"
        self.p.non_terminated_nodes({})
        self.assertEqual(self.p.internal_ip("r"), "203.0.113.8")

    def test_destroy_requested_is_ended(self):
        self.admin.cands["x"] = {"candidate_id": "x", "node_type": "gpu", "state": "destroy_requested"}
        self.assertEqual(self.p.non_terminated_nodes({ra.TAG_RAY_NODE_KIND: "worker"}), [])
        self.assertEqual(self.admin.cands["x"]["state"], "ended")
        self.assertTrue(self.p.is_terminated("x"))

    def test_head_is_listed_as_head(self):
        self.assertEqual(self.p.node_tags("head")[ra.TAG_RAY_NODE_KIND], ra.NODE_KIND_HEAD)
        self.assertEqual(self.p.node_tags("head")[ra.TAG_RAY_USER_NODE_TYPE], "head")
        self.assertEqual(self.p.node_tags("head")[ra.TAG_RAY_NODE_STATUS], ra.STATUS_UP_TO_DATE)
        self.assertTrue(self.p.is_running("head"))
        self.assertFalse(self.p.is_terminated("head"))
        self.assertEqual(self.p.non_terminated_nodes({ra.TAG_RAY_NODE_KIND: "head"}), ["head"])

    def test_unknown_node_is_terminated(self):
        self.assertTrue(self.p.is_terminated("ghost"))
        self.assertFalse(self.p.is_running("ghost"))
        self.assertEqual(self.p.node_tags("ghost"), {})
        self.assertIsNone(self.p.external_ip("ghost"))

    def test_errors_surface(self):
        with self.assertRaises(ra.AdminError) as cm:
            self.p.create_node({}, {ra.TAG_RAY_USER_NODE_TYPE: "tpu"}, 1)
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(ValueError):
            self.p.create_node({}, {}, 1)
        with self.assertRaises(ValueError):
            ra.RayvastNodeProvider({}, "c1")

    def test_node_type_from_node_config(self):
        created = self.p.create_node({"node_type": "cpu"}, {}, 1)
        self.assertEqual(self.admin.cands[list(created)[0]]["node_type"], "cpu")

    def test_attach_rental(self):
        cid = list(self.p.create_node({}, {ra.TAG_RAY_USER_NODE_TYPE: "gpu"}, 1))[0]
        self.p.attach_rental(cid, instance_id="i-1", host_id="h1", public_ip="203.0.113.9")
        self.assertEqual(self.admin.cands[cid]["state"], "running")
        self.assertEqual(json.loads(self.admin.requests[-1][2]), {"instance_id": "i-1", "host_id": "h1", "public_ip": "203.0.113.9"})
        # A field already set differently: 409 conflict surfaces, the candidate lives on.
        with self.assertRaises(ra.AdminError) as cm:
            self.p.attach_rental(cid, instance_id="i-2")
        self.assertEqual(cm.exception.status, 409)
        self.assertNotIsInstance(cm.exception, ra.HostBlocklisted)
        self.assertEqual(self.admin.cands[cid]["state"], "running")

    def test_attach_rental_on_blocklisted_host_deletes(self):
        # The head refuses a rental on a blocklisted host (409 host_blocklisted):
        # the candidate is DELETEd (its token dies) and the caller is told to
        # end the rental.
        cid = list(self.p.create_node({}, {ra.TAG_RAY_USER_NODE_TYPE: "gpu"}, 1))[0]
        with self.assertRaises(ra.HostBlocklisted) as cm:
            self.p.attach_rental(cid, instance_id="i-3", host_id="bad-host")
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(self.admin.cands[cid]["state"], "ended")
        self.assertEqual(self.admin.requests[-1][0:2], ("DELETE", "/v1/candidates/" + cid))
        self.assertTrue(self.p.is_terminated(cid))

    def test_refresh_survives_failed_delete(self):
        # A destroy_requested candidate whose DELETE fails (head busy) does not
        # break Ray's listing; it is tried again on the next listing.
        self.admin.cands["x"] = {"candidate_id": "x", "node_type": "gpu", "state": "destroy_requested"}
        self.admin.cands["y"] = {"candidate_id": "y", "node_type": "gpu", "state": "enrolled"}
        orig = self.admin.handle
        fail = [True]

        def flaky(method, path, body):
            if method == "DELETE" and fail[0]:
                fail[0] = False
                return 503, {"error": "busy"}
            return orig(method, path, body)

        self.admin.handle = flaky
        self.assertEqual(self.p.non_terminated_nodes({}), ["head", "y"])
        self.assertEqual(self.admin.cands["x"]["state"], "destroy_requested")
        self.p.non_terminated_nodes({})
        self.assertEqual(self.admin.cands["x"]["state"], "ended")


if __name__ == "__main__":
    unittest.main()
