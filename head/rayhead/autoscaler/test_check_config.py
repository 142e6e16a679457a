"""Tests of check_config.py on example.yaml and broken copies of it."""

import copy
import json
import os
import unittest

import yaml

import check_config as cc

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(HERE, name)) as f:
        return yaml.safe_load(f) if name.endswith(".yaml") else json.load(f)


class CheckConfigTest(unittest.TestCase):
    def setUp(self):
        self.schema = load("testdata/ray-schema.json")
        self.example = load("example.yaml")

    def test_example_passes(self):
        self.assertEqual(cc.problems(self.example, self.schema), [])
        self.assertEqual(cc.main([os.path.join(HERE, "example.yaml")]), 0)

    def broken(self, change):
        c = copy.deepcopy(self.example)
        change(c)
        return cc.problems(c, self.schema)

    def test_each_v1_key_is_needed(self):
        for k in cc.V1_KEYS:
            with self.subTest(key=k):
                got = self.broken(lambda c: c.pop(k))
                self.assertTrue(any(repr(k) in p or "head_node_type" in p for p in got), got)

    def test_rayvast_needs(self):
        for name, change, want in [
            ("updaters on", lambda c: c["provider"].update(disable_node_updaters=False), "disable_node_updaters"),
            ("launch check on", lambda c: c["provider"].pop("disable_launch_config_check"), "disable_launch_config_check"),
            ("no head type", lambda c: c["available_node_types"].pop("head"), "head_node_type"),
            ("no socket", lambda c: c["provider"].pop("admin_socket"), "admin_socket"),
            ("min above max", lambda c: c.update(max_workers=0), "max_workers"),
        ]:
            with self.subTest(name):
                got = self.broken(change)
                self.assertTrue(any(want in p for p in got), got)

    def test_ray_schema_applies(self):
        # Ray's schema refuses unknown top-level keys and fractional resources.
        for name, change in [
            ("unknown key", lambda c: c.update(head_node={})),
            ("fractional GPU", lambda c: c["available_node_types"]["gpu1"]["resources"].update(GPU=0.5)),
            ("no provider type", lambda c: c["provider"].pop("type")),
        ]:
            with self.subTest(name):
                got = self.broken(change)
                self.assertTrue(got and got[0].startswith("Ray's schema"), got)


if __name__ == "__main__":
    unittest.main()
