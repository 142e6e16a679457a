"""Stand-in dashboard agent (Ray's python/ray/dashboard/agent.py and
http_server_agent.py, the reporter's metrics exporter).

As Ray's: the gRPC server binds 0.0.0.0 (127.0.0.1 when the node IP is
local-host) on --grpc-port; the metrics exporter binds every interface
(127.0.0.1 when the node IP is 127.0.0.1) on --metrics-export-port; both
fatal. The HTTP server binds the node IP and then, unless the node IP is
local-host, 127.0.0.1 on the same --listen-port, retrying 5 times with
exponential backoff; when every attempt fails the HTTP server is off and
the agent runs on silently. Sources: test/fakeray/SOURCES.md.
"""

import argparse
import os
import random
import signal
import socket
import sys
import time

from ray._private.fakeray_status import Status, sockname, sockop

LOCALHOSTS = ("localhost", "127.0.0.1", "::1")
HTTP_RETRIES = 5
HTTP_BASE_DELAY = 0.1
HELD = []


def parse():
    p = argparse.ArgumentParser()
    for name in ("node-id", "node-manager-port", "object-store-name", "raylet-name", "temp-dir",
                 "log-dir", "session-name", "gcs-address", "cluster-id-hex", "logging-filename",
                 "logging-format", "stdout-filepath", "stderr-filepath"):
        p.add_argument("--" + name, default="")
    p.add_argument("--node-ip-address", required=True)
    p.add_argument("--metrics-export-port", type=int, default=0)
    p.add_argument("--grpc-port", type=int, default=0)
    p.add_argument("--listen-port", type=int, default=52365)
    p.add_argument("--session-dir", required=True)
    p.add_argument("--logging-rotate-bytes", type=int, default=0)
    p.add_argument("--logging-rotate-backup-count", type=int, default=0)
    p.add_argument("--minimal", action="store_true")
    p.add_argument("--head", action="store_true")
    return p.parse_args()


def listen(status, host, port):
    """Bind and listen one TCP socket (aiohttp and gRPC set SO_REUSEADDR);
    record the outcome; raise on failure."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
        s.listen(128)
    except OSError as e:
        status.bind(sockop("bind", host, port, e))
        s.close()
        raise
    status.bind(sockop("bind", host, port, None, sockname(s)))
    return s


def start_http(status, ip, port):
    """HttpServerAgent._start_site_with_retry: the node IP, then 127.0.0.1.
    A site that started stays open when its partner fails (as aiohttp's do),
    so a retry on the same port can fail with EADDRINUSE."""
    kept = []
    for attempt in range(HTTP_RETRIES + 1):
        try:
            kept.append(listen(status, ip, port))
            if ip not in LOCALHOSTS:
                kept.append(listen(status, "127.0.0.1", port))
            return kept
        except OSError:
            if attempt < HTTP_RETRIES:
                time.sleep(HTTP_BASE_DELAY * (2 ** attempt) + random.uniform(0, 0.1))
    HELD.extend(kept)  # aiohttp's runner keeps a started site open
    return None


def main():
    args = parse()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    status = Status(args.session_dir, "dashboard_agent")
    status.set()
    ip = args.node_ip_address
    try:
        grpc_ip = "127.0.0.1" if ip in LOCALHOSTS else "0.0.0.0"
        socks = [listen(status, grpc_ip, args.grpc_port)]
        socks.append(listen(status, "127.0.0.1" if ip == "127.0.0.1" else "0.0.0.0", args.metrics_export_port))
    except OSError:
        status.set(state="exited")
        raise  # fatal, as Ray's: the raylet fate-shares with this agent
    http = start_http(status, ip, args.listen_port)
    status.set(state="running", http_server="on" if http else "off")
    raylet = os.getppid()
    while os.getppid() == raylet:  # Ray's agent ends when its raylet is gone
        time.sleep(0.2)
    status.set(state="exited")


if __name__ == "__main__":
    main()
