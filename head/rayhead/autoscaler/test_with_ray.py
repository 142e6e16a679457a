"""The plugin with real Ray importable (autoscaler_test.go's TestWithRay runs
it with real Ray's Python): its tag names and statuses are the values of
Ray's own ray.autoscaler.tags, and the values it uses without Ray
(RAY_TAGS_WITHOUT_RAY) equal them too; a create the head refuses reaches
Ray as its NodeLaunchException."""

import http.server
import os
import shutil
import socketserver
import sys
import tempfile
import threading
import unittest

from ray.autoscaler import tags
from ray.autoscaler.node_launch_exception import NodeLaunchException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rayvast_autoscaler as ra  # noqa: E402


class RayNamesTest(unittest.TestCase):
    def test_names_come_from_ray(self):
        for name in ra.RAY_TAGS_WITHOUT_RAY:
            with self.subTest(name=name):
                self.assertEqual(getattr(ra, name), getattr(tags, name))

    def test_names_without_ray_are_rays(self):
        for name, value in ra.RAY_TAGS_WITHOUT_RAY.items():
            with self.subTest(name=name):
                self.assertEqual(value, getattr(tags, name))

    def test_node_kind_key(self):
        # The key Ray's v1 autoscaler indexes every node's tags with.
        self.assertEqual(ra.TAG_RAY_NODE_KIND, "ray-node-type")


class RefusedCreateTest(unittest.TestCase):
    """A head that refuses every create with 409 node_type_paused."""

    def setUp(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b'{"error":"node_type_paused","reason":"renting of node type gpu is paused"}'
                self.send_response(409)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self.dir = tempfile.mkdtemp()
        sock = os.path.join(self.dir, "admin.sock")
        self.srv = Server(sock, Handler)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.p = ra.RayvastNodeProvider({"type": "external", "admin_socket": sock}, "c1")

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_refusal_is_a_node_launch_exception(self):
        with self.assertRaises(NodeLaunchException) as cm:
            self.p.create_node_with_resources_and_labels({}, {tags.TAG_RAY_USER_NODE_TYPE: "gpu"}, 1, {"GPU": 1}, {})
        self.assertEqual(cm.exception.category, "node_type_paused")
        self.assertIn("paused", cm.exception.description)


if __name__ == "__main__":
    unittest.main()
