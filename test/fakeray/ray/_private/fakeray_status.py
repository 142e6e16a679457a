"""Status files of the stand-in's processes (not a Ray module).

Every process of the fake tree writes SESSION_DIR/fakeray/NAME.json
atomically; `ray start` folds them into its record (test/fakeray/README.md).
The native programs write the same shape from C (native/status.h).
"""

import errno
import json
import os
import sys
import tempfile


def write_atomic(path, obj):
    """Write JSON so a reader polling the file never sees half of it."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".fakeray-", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def sockop(op, addr, port, err=None, result=""):
    """One bind or connect as the natives record it (errno names for tests)."""
    code = err.errno if isinstance(err, OSError) and err.errno else (1 if err else 0)
    return {
        "op": op,
        "addr": addr,
        "port": port,
        "ok": err is None,
        "errno": code,
        "errno_name": errno.errorcode.get(code, "other") if code else "",
        "error": str(err) if err else "",
        "result": result,
    }


def sockname(sock):
    try:
        a = sock.getsockname()
        return "%s:%d" % (a[0], a[1])
    except OSError:
        return ""


class Status:
    """The status file of one process, rewritten on every change."""

    def __init__(self, session_dir, name):
        self.path = os.path.join(session_dir, "fakeray", name + ".json")
        self.data = {
            "name": name,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": sys.argv,
            "env": dict(os.environ),
            "state": "starting",
            "binds": [],
        }

    def set(self, **kw):
        self.data.update(kw)
        write_atomic(self.path, self.data)

    def bind(self, entry):
        self.data["binds"].append(entry)
        write_atomic(self.path, self.data)
