"""Stand-in for ``ray start --block``: records how it was started, then blocks.

The record (JSON, written atomically) tells a test what the supervisor gave Ray:
argv, environment, pid/ppid/pgid/sid, cwd, sys.path[0:3] (to see the shim first)
and which FAKERAY_IMPORT modules imported. On a stop signal the record is
rewritten with "signal" added. Env vars are documented in test/fakeray/README.md.
Python 3.9+, standard library only.
"""

import importlib
import json
import os
import signal
import sys
import tempfile
import time

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def record_path():
    return os.environ.get("FAKERAY_RECORD") or "/tmp/fakeray-record.json"


def exit_code():
    return int(os.environ.get("FAKERAY_EXIT_CODE") or "0")


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


def say(line):
    """Write a line to stdout unbuffered: print() from a signal handler that
    interrupts another print() raises "reentrant call"."""
    os.write(1, (line + "\n").encode())


def try_imports(names):
    """Report, per module name, whether it imports (proves the shim is on sys.path)."""
    got = {}
    for name in [n for n in names.split(",") if n]:
        try:
            importlib.import_module(name)
            got[name] = True
        except Exception as e:  # noqa: BLE001 - any failure means "not importable"
            got[name] = "%s: %s" % (type(e).__name__, e)
    return got


def base_record():
    return {
        "argv": sys.argv[1:],
        "orig_argv": getattr(sys, "orig_argv", None),
        "executable": sys.executable,
        "env": dict(os.environ),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "cwd": os.getcwd(),
        "sys_path": sys.path[0:3],
        "imports": try_imports(os.environ.get("FAKERAY_IMPORT", "")),
    }


def main():
    args = sys.argv[1:]
    if not args or args[0] != "start":
        print("fakeray: only 'start' is faked", file=sys.stderr)
        return 2
    rec = base_record()
    path = record_path()
    ignored = []

    def on_signal(signum, _frame):
        if signum == signal.SIGTERM and os.environ.get("FAKERAY_IGNORE_TERM") == "1":
            ignored.append(signum)
            rec["ignored"] = ignored
            write_atomic(path, rec)
            say("fakeray ignored SIGTERM")
            return
        rec["signal"] = signum
        write_atomic(path, rec)
        sys.exit(exit_code())

    # Handlers go in before the record exists, so a test that waits for the
    # record and then signals can never hit the default action.
    for s in STOP_SIGNALS:
        signal.signal(s, on_signal)
    write_atomic(path, rec)
    say("fakeray started")
    if "--block" not in args:
        return 0  # like `ray start` without --block: daemons started, command returns
    after = os.environ.get("FAKERAY_EXIT_AFTER")
    if after:
        time.sleep(float(after))  # PEP 475: signals run their handler and end here
        rec["exited_after"] = float(after)
        write_atomic(path, rec)
        return exit_code()
    tick = float(os.environ.get("FAKERAY_TICK_S") or "0")
    n = 0
    while True:
        if tick > 0:
            time.sleep(tick)  # a line now and then, as Ray's log grows
            n += 1
            say("fakeray tick %d" % n)
        else:
            signal.pause()


if __name__ == "__main__":
    sys.exit(main())
