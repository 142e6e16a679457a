"""Stand-in runtime-env agent (Ray's python/ray/_private/runtime_env/agent/main.py).

As Ray's since 2.50: binds (--node-ip-address, --runtime-env-agent-port)
with getaddrinfo's first answer and SO_REUSEADDR; a failed bind is an
uncaught exception (exit 1), and the raylet fate-shares with it. Then it
serves HTTP until its raylet goes away. Sources: test/fakeray/SOURCES.md.
"""

import argparse
import os
import signal
import socket
import sys

from ray._private.fakeray_status import Status, sockname, sockop

HTTP_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


def parse():
    p = argparse.ArgumentParser()
    for name in ("node-id", "gcs-address", "cluster-id-hex", "runtime-env-dir", "log-dir",
                 "temp-dir", "logging-filename", "logging-format", "stdout-filepath", "stderr-filepath"):
        p.add_argument("--" + name, default="")
    p.add_argument("--node-ip-address", required=True)
    p.add_argument("--runtime-env-agent-port", type=int, default=0)
    p.add_argument("--session-dir", required=True)
    p.add_argument("--logging-rotate-bytes", type=int, default=0)
    p.add_argument("--logging-rotate-backup-count", type=int, default=0)
    return p.parse_args()


def serve(sock, status):
    """Answer every request until the raylet (our parent) is gone, as Ray's
    check_raylet_task ends the agent."""
    raylet = os.getppid()
    sock.settimeout(0.2)
    served = 0
    while os.getppid() == raylet:
        try:
            c, _ = sock.accept()
        except socket.timeout:
            continue
        with c:
            c.settimeout(1)
            try:
                c.recv(4096)
                c.sendall(HTTP_OK)
            except OSError:
                pass
        served += 1
        status.set(served=served)


def main():
    args = parse()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # aiohttp's run_app: graceful exit
    status = Status(args.session_dir, "runtime_env_agent")
    status.set()
    port = args.runtime_env_agent_port or 0
    family, socktype, proto, _, sockaddr = socket.getaddrinfo(args.node_ip_address, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, socktype, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(sockaddr)
        sock.listen(128)
    except OSError as e:
        status.bind(sockop("bind", args.node_ip_address, port, e))
        status.set(state="exited")
        raise  # the traceback and exit 1 of Ray's agent
    status.bind(sockop("bind", args.node_ip_address, port, None, sockname(sock)))
    status.set(state="running")
    serve(sock, status)
    status.set(state="exited")


if __name__ == "__main__":
    main()
