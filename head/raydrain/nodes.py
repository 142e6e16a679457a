# Prints, as one JSON line, the Ray nodes named sys.argv[1] (rayvast names a
# node's Ray after its instance ID): their node IDs and states, read from
# the Ray head's state API (RAY_API_SERVER_ADDRESS, on loopback).
import json
import os
import sys

from ray.util.state import list_nodes

name = sys.argv[1]
nodes = list_nodes(address=os.environ.get("RAY_API_SERVER_ADDRESS"),
                   filters=[("node_name", "=", name)],
                   raise_on_missing_output=False)
print(json.dumps([{"node_id": n.node_id, "state": n.state} for n in nodes]))
