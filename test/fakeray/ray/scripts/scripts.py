"""Stand-in for `python -m ray.scripts.scripts start …` (Ray's scripts.py).

It parses the options as Ray's click command does (cli.py), applies Ray's
checks (ray/_private/checks.py), and with --block starts Ray's process tree:
the reaper, on the head the GCS, and the native raylet, which starts the
runtime-env agent, the dashboard agent and core workers (see node.py). It
keeps a JSON record of how it was started and what each child did, blocks,
and exits as Ray's does: 1 after SIGTERM (children killed first) or when a
child dies unexpectedly. README.md documents the record and the FAKERAY_*
knobs; SOURCES.md names the Ray source of every behaviour.
Python 3.9+, standard library only.
"""

import importlib
import os
import signal
import sys
import time

import ray
from ray._private import checks, node, tree
from ray._private.fakeray_status import write_atomic
from ray.scripts import cli

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL_S = 0.1  # Ray's --block loop polls every 1 s; faster keeps tests quick


def record_path():
    return os.environ.get("FAKERAY_RECORD") or "/tmp/fakeray-record.json"


def exit_code(ray_default):
    """FAKERAY_EXIT_CODE when set, else what Ray would do."""
    v = os.environ.get("FAKERAY_EXIT_CODE")
    return int(v) if v else ray_default


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
        "version": ray.__version__,
        "env": dict(os.environ),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "cwd": os.getcwd(),
        "sys_path": sys.path[0:3],
        "imports": try_imports(os.environ.get("FAKERAY_IMPORT", "")),
    }


class Run:
    """One `ray start`: its record and, once started, its process tree."""

    def __init__(self):
        self.rec = base_record()
        self.path = record_path()
        self.ignored = []
        self.tree = None
        self.pending = None  # a stop signal the --block loop has yet to act on

    def save(self):
        write_atomic(self.path, self.rec)

    def fail(self, code, msg):
        self.rec["error"] = msg
        self.rec["exit_code"] = code
        self.note_ignored()
        self.save()
        return code

    def note_ignored(self):
        """Copy the SIGTERMs the handler ignored into the record; True when new."""
        if len(self.ignored) == len(self.rec.get("ignored", [])):
            return False
        self.rec["ignored"] = list(self.ignored)
        return True

    def stop(self, code):
        """Kill the children (Node.kill_all_processes), record, exit."""
        if self.tree:
            self.tree.kill_all()
            self.rec.update(self.tree.gather())
        self.rec["exit_code"] = code
        self.note_ignored()
        self.save()
        return code

    def on_signal(self, signum, _frame):
        """Only note the signal: the --block loop acts on it. Stopping here
        could deadlock: the handler may interrupt Popen.poll() while it
        holds the lock that Popen.wait() needs."""
        if signum == signal.SIGTERM and os.environ.get("FAKERAY_IGNORE_TERM") == "1":
            self.ignored.append(signum)  # recorded by the loop: never touch rec here
            say("fakeray ignored SIGTERM")
            return
        if self.pending is None:
            self.pending = signum

    def finish_signal(self):
        signum = self.pending
        self.rec["signal"] = signum
        if signum == signal.SIGTERM:
            # Node's SIGTERM handler: kill_all_processes, then sys.exit(1).
            return self.stop(exit_code(1))
        # SIGINT (KeyboardInterrupt, atexit kills the children) and SIGHUP
        # (no handler; the reaper kills the group) end Ray by the signal.
        code = os.environ.get("FAKERAY_EXIT_CODE")
        if code:
            return self.stop(int(code))
        self.stop(-signum)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum  # not reached: the default action ends us

    def main(self, args):
        # Handlers go in before the record exists, so a test that waits for
        # the record and then signals can never hit the default action.
        for s in STOP_SIGNALS:
            signal.signal(s, self.on_signal)
        self.save()
        try:
            opts = cli.parse_start(args, ray.__version__)
        except cli.UsageError as e:
            self.fail(2, str(e))
            return cli.usage_error(str(e))
        try:
            cfg = node.configure(opts, ray.__version__, os.environ)
        except checks.Abort as e:
            sys.stderr.write("Error: %s\n" % e)
            return self.fail(1, str(e))
        self.rec["node"] = cfg
        self.save()
        if not opts["block"]:
            return 0  # Ray's daemons would run on; the stand-in starts none without --block
        if self.pending is not None:
            return self.finish_signal()
        self.tree = tree.Tree(cfg)
        self.tree.start()
        return self.block()

    def block(self):
        after = os.environ.get("FAKERAY_EXIT_AFTER")
        deadline = time.monotonic() + float(after) if after else None
        tick = float(os.environ.get("FAKERAY_TICK_S") or "0")
        next_tick, ticks = time.monotonic() + tick, 0
        started = False
        while True:
            time.sleep(POLL_S)  # PEP 475: a signal runs its handler here
            if self.pending is not None:
                return self.finish_signal()
            if tick > 0 and time.monotonic() >= next_tick:
                ticks += 1
                next_tick += tick
                say("fakeray tick %d" % ticks)  # a line now and then, as Ray's log grows
            got = self.tree.gather()
            changed = self.note_ignored()
            if got != {k: self.rec.get(k) for k in got} or changed:
                self.rec.update(got)
                self.save()
            if not started and got["started"]:
                started = True
                say("fakeray started")
                # Ray's own words once its node is in the cluster (scripts.py
                # `start`, after the raylet registered with the GCS): what
                # the agent and the head wait for before saying "running".
                say("--------------------\nRay runtime started.\n--------------------")
            dead = self.tree.unexpected_deaths()
            if dead:
                sys.stderr.write("Some Ray subprocesses exited unexpectedly: %s\nRemaining processes will be killed.\n" % dead)
                self.rec["unexpected_exits"] = dead
                return self.stop(1)
            if deadline and time.monotonic() >= deadline:
                self.rec["exited_after"] = float(after)
                return self.stop(exit_code(1))


def main():
    args = sys.argv[1:]
    if not args or args[0] != "start":
        print("fakeray: only 'start' is faked", file=sys.stderr)
        return 2
    return Run().main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
