"""Stand-in head dashboard (Ray's python/ray/dashboard/dashboard.py and
http_server_head.py): binds --host:--port, on failure the next port, up to
--port-retries more; none free is an uncaught exception (exit 1). Runs until
`ray start` is gone. Sources: test/fakeray/SOURCES.md.
"""

import argparse
import os
import signal
import socket
import sys
import time

from ray._private.fakeray_status import Status, sockname, sockop


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", required=True, type=int)
    p.add_argument("--port-retries", type=int, default=0)
    p.add_argument("--session-dir", required=True)
    for name in ("temp-dir", "log-dir", "gcs-address", "cluster-id-hex", "node-ip-address"):
        p.add_argument("--" + name, default="")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    status = Status(args.session_dir, "dashboard")
    status.set()
    port, held = args.port, None
    for _ in range(1 + args.port_retries):
        s = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((args.host, port))
            s.listen(128)
            status.bind(sockop("bind", args.host, port, None, sockname(s)))
            held = s
            break
        except OSError as e:
            status.bind(sockop("bind", args.host, port, e))
            s.close()
            port += 1
    if held is None:
        status.set(state="exited")
        raise Exception("Failed to find a valid port for dashboard after %d retries" % args.port_retries)
    status.set(state="running", url="%s:%d" % (args.host, port))
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
