"""python -m ray.step (bind|connect) HOST PORT ...: what a Python child of Ray
does with its sockets. Prints one line per op, "ok <local>" or "err <errno
name>", stops at the first error with exit 1. Sockets stay open until exit."""
import errno
import socket
import sys

held = []
args = sys.argv[1:]
for i in range(0, len(args), 3):
    what, host, port = args[i], args[i + 1], int(args[i + 2])
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    held.append(s)
    try:
        if what == "bind":
            s.bind((host, port))
            s.listen(16)
        else:
            s.connect((host, port))
    except OSError as e:
        print("err %s" % errno.errorcode.get(e.errno, e.errno), flush=True)
        sys.exit(1)
    print("ok %s:%d" % s.getsockname()[:2], flush=True)
