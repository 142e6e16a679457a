"""Does real Ray enforce the cluster token? (realray_floor_test.go)

Run inside fresh network, PID and mount namespaces (loopback only; every Ray
process dies with the namespace, so no `ray stop`). Starts a Ray head with
RAY_AUTH_MODE=token and a token file, then tries to add a worker node
three ways: without a token, with a wrong token, with the right one. Prints
one JSON line: for each way, `ray start`'s exit code and whether Ray said
the token was refused.

usage: token_floor.py TEMP_DIR
"""

import json
import os
import subprocess
import sys

py, tmp = sys.executable, sys.argv[1]


def token_file(name, value):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(value + "\n")
    os.chmod(path, 0o600)
    return path


base = {"PATH": os.environ["PATH"], "RAY_USAGE_STATS_ENABLED": "0", "TMPDIR": tmp, "PYTHONDONTWRITEBYTECODE": "1"}
right = dict(base, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token_file("right", "the-cluster-token-0123456789abcdef"))
wrong = dict(base, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token_file("wrong", "another-token-0123456789abcdef0000"))
head = subprocess.run(
    [py, "-m", "ray.scripts.scripts", "start", "--head", "--node-ip-address=127.0.0.1", "--port=6399",
     "--num-cpus=0", "--include-dashboard=false", "--disable-usage-stats"],
    env=right, capture_output=True, text=True, timeout=180)
out = {"head_exit": head.returncode}
if head.returncode == 0:
    for name, env in (("no_token", base), ("wrong_token", wrong), ("right_token", right)):
        w = subprocess.run(
            [py, "-m", "ray.scripts.scripts", "start", "--address=127.0.0.1:6399", "--node-ip-address=127.0.0.1",
             "--num-cpus=1", "--disable-usage-stats"],
            env=env, capture_output=True, text=True, timeout=180)
        text = w.stdout + w.stderr
        out[name] = {"exit": w.returncode, "refused": "AuthenticationError" in text or "InvalidAuthToken" in text}
else:
    out["head_output"] = (head.stdout + head.stderr)[-1500:]
print(json.dumps(out), flush=True)
