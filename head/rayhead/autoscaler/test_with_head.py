"""The plugin driven the way Ray's autoscalers call it, against a real
`head serve --provider none` (autoscaler_test.go starts it and sets
RAYVAST_TEST_ADMIN_SOCKET; without it these tests skip).

The call sequences and tags are written from Ray's source (master,
commit 15252a79, see testdata/SOURCES.md):
- v1: _private/autoscaler.py NonTerminatedNodes lists with
  non_terminated_nodes({}) and reads node_tags(id)["ray-node-type"] of each,
  taking the one of kind "head" as the head; _private/node_launcher.py
  launches with create_node_with_resources_and_labels(node_config, tags,
  count, resources, labels), tags name/kind worker/status uninitialized/
  launch config/user node type; unhealthy and idle nodes end through
  terminate_nodes(ids); only nodes whose ray-node-status is up-to-date are
  judged healthy or not.
- v2: v2/instance_manager/node_provider.py NodeProviderAdapter's
  get_non_terminated calls non_terminated_nodes({}), then node_tags and
  is_running per ID, the ID being the cloud instance ID Ray matches with
  each node's RAY_CLOUD_INSTANCE_ID; _launch_nodes_by_type adds
  ray-launch-request; terminate calls terminate_nodes(ids).
"""

import os
import unittest

import rayvast_autoscaler as ra

SOCK = os.environ.get("RAYVAST_TEST_ADMIN_SOCKET")

NODE_CONFIG = {}  # available_node_types.gpu1.node_config of example.yaml
RESOURCES = {"GPU": 1}
LABELS = {"gpu": "4090"}


def v1_launch_tags(cluster):
    return {
        "ray-node-name": "ray-%s-worker" % cluster,
        "ray-node-type": "worker",
        "ray-node-status": "uninitialized",
        "ray-launch-config": "0123abcd",
        "ray-user-node-type": "gpu1",
    }


def v1_non_terminated(p):
    """NonTerminatedNodes.__init__: (worker ids, head id)."""
    workers, head = [], None
    for node in p.non_terminated_nodes({}):
        kind = p.node_tags(node)["ray-node-type"]
        if kind == "worker":
            workers.append(node)
        elif kind == "head":
            head = node
    return workers, head


def v2_get_non_terminated(p):
    """NodeProviderAdapter.get_non_terminated, as dicts."""
    out = {}
    for cid in p.non_terminated_nodes({}):
        tags = p.node_tags(cid)
        kind = tags.get("ray-node-type", "unmanaged")
        if kind == "unmanaged":
            continue
        if kind not in ("worker", "head"):
            raise ValueError("Invalid node kind: %s" % kind)
        out[cid] = {"node_type": tags.get("ray-user-node-type", ""), "is_running": p.is_running(cid),
                    "request_id": tags.get("ray-launch-request", ""), "node_kind": kind}
    return out


@unittest.skipUnless(SOCK, "RAYVAST_TEST_ADMIN_SOCKET not set (autoscaler_test.go sets it)")
class WithHeadTest(unittest.TestCase):
    def setUp(self):
        self.p = ra.RayvastNodeProvider(
            {"type": "external", "admin_socket": SOCK, "head_ip": "127.0.0.1",
             "disable_node_updaters": True, "disable_launch_config_check": True}, "withhead")

    def tearDown(self):
        workers, _ = v1_non_terminated(self.p)
        self.p.terminate_nodes(workers)

    def test_v1(self):
        workers, head = v1_non_terminated(self.p)
        self.assertEqual(head, "head")
        self.assertEqual(workers, [])
        created = self.p.create_node_with_resources_and_labels(
            dict(NODE_CONFIG), v1_launch_tags("withhead"), 2, RESOURCES, LABELS)
        self.assertEqual(len(created), 2)
        workers, head = v1_non_terminated(self.p)
        self.assertEqual(sorted(workers), sorted(created))
        for w in workers:
            self.assertTrue(w.startswith("c-"), w)  # candidate IDs: the nodes' RAY_CLOUD_INSTANCE_ID
            tags = self.p.node_tags(w)
            self.assertEqual(tags["ray-user-node-type"], "gpu1")
            self.assertEqual(tags["ray-launch-config"], "0123abcd")  # Ray's own tag kept
        # A renter attaches a rental: the head says running, and that is
        # the status Ray sees, not the "uninitialized" it stored.
        w = workers[0]
        self.p.attach_rental(w, instance_id="i-1", public_ip="198.51.100.7", host_id="h-1")
        self.p.non_terminated_nodes({})
        self.assertEqual(self.p.node_tags(w)["ray-node-status"], ra.STATUS_WAITING_FOR_SSH)
        self.assertTrue(self.p.is_running(w))
        # Its IP is Ray's only once it enrolls (IPs are reused).
        self.assertIsNone(self.p.internal_ip(w))
        self.assertEqual(self.p.internal_ip("head"), "127.0.0.1")
        self.p.terminate_nodes(workers)
        workers, head = v1_non_terminated(self.p)
        self.assertEqual((workers, head), ([], "head"))
        states = {c["candidate_id"]: c["state"] for c in self.p.admin.candidates()}
        self.assertTrue(all(states[c] == "ended" for c in created), states)

    def test_v2(self):
        got = v2_get_non_terminated(self.p)
        self.assertEqual(got, {"head": {"node_type": "head", "is_running": True, "request_id": "", "node_kind": "head"}})
        tags = dict(v1_launch_tags("withhead"), **{"ray-launch-request": "req-1"})
        self.p.create_node_with_resources_and_labels(dict(NODE_CONFIG), tags, 1, RESOURCES, LABELS)
        got = v2_get_non_terminated(self.p)
        ids = [cid for cid, v in got.items() if v["node_kind"] == "worker"]
        self.assertEqual(len(ids), 1)
        self.assertEqual(got[ids[0]], {"node_type": "gpu1", "is_running": False, "request_id": "req-1", "node_kind": "worker"})
        self.p.terminate_nodes(ids)
        self.assertEqual(list(v2_get_non_terminated(self.p)), ["head"])


if __name__ == "__main__":
    unittest.main()
