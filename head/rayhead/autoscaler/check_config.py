"""Check a Ray cluster YAML for the rayvast plugin the way Ray will read it.

    python3 check_config.py [--schema testdata/ray-schema.json] FILE...

Each FILE is validated against Ray's own ray-schema.json (what Ray's
_private/util.py validate_config does, with jsonschema), then checked for
what validate_config checks after the schema, for every key Ray's v1
StandardAutoscaler indexes directly (it reads the YAML raw, so a missing key
is a KeyError in the monitor), and for what rayvast needs: node updaters
and the launch config check off, the plugin's module, an admin socket.
Exit 0 when every file passes; otherwise each problem is printed.
Needs python3-yaml and python3-jsonschema.
"""

import json
import os
import sys

import jsonschema
import yaml

# Keys _private/autoscaler.py indexes as config[key] (testdata/SOURCES.md).
V1_KEYS = (
    "file_mounts", "cluster_synced_files", "worker_setup_commands", "worker_start_ray_commands",
    "auth", "max_workers", "head_node_type", "cluster_name", "idle_timeout_minutes",
    "available_node_types",
)

HERE = os.path.dirname(os.path.abspath(__file__))


def problems(config, schema):
    out = []
    try:
        jsonschema.validate(config, schema)
    except jsonschema.ValidationError as e:
        return ["Ray's schema: %s (at %s)" % (e.message, "/".join(str(p) for p in e.absolute_path))]
    for k in V1_KEYS:
        if k not in config:
            out.append("missing %r: Ray's v1 autoscaler indexes it directly" % k)
    types = config.get("available_node_types", {})
    head = config.get("head_node_type")
    if head not in types:
        out.append("head_node_type %r is not in available_node_types (v2 needs the head's type)" % head)
    if sum(t.get("min_workers", 0) for t in types.values()) > config.get("max_workers", 0):
        out.append("max_workers is below the sum of min_workers")
    prov = config.get("provider", {})
    if prov.get("type") != "external" or prov.get("module") != "rayvast_autoscaler.RayvastNodeProvider":
        out.append("provider: want type external, module rayvast_autoscaler.RayvastNodeProvider")
    if not prov.get("admin_socket"):
        out.append("provider.admin_socket: missing")
    if prov.get("disable_node_updaters") is not True:
        out.append("provider.disable_node_updaters: must be true (else Ray SSHes into every node)")
    if prov.get("disable_launch_config_check") is not True:
        out.append("provider.disable_launch_config_check: must be true (else a monitor restart ends every node)")
    return out


def main(argv):
    schema_path = os.path.join(HERE, "testdata", "ray-schema.json")
    if len(argv) > 1 and argv[0] == "--schema":
        schema_path, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    with open(schema_path) as f:
        schema = json.load(f)
    bad = 0
    for path in argv:
        with open(path) as f:
            config = yaml.safe_load(f)
        for p in problems(config, schema):
            print("%s: %s" % (path, p))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
