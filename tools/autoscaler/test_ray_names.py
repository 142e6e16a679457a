"""The plugin's tag names and statuses are Ray's: with Ray installed they are
the values of Ray's own ray.autoscaler.tags, and the values it uses without
Ray (RAY_TAGS_WITHOUT_RAY) equal them too. Run with real Ray's Python
(autoscaler_test.go's TestRayNames)."""

import os
import sys
import unittest

from ray.autoscaler import tags

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


if __name__ == "__main__":
    unittest.main()
