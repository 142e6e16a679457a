"""The `ray start` command line as Ray's click command parses it.

Ray's python/ray/scripts/scripts.py declares `start` with click; this is the
part of its surface rayvast uses, parsed with click's rules: `--flag=value`
or `--flag value`, flags take no value, the last repeat wins, a wrong type or
an unknown option is a usage error (exit 2). Ray options the stand-in does
not model are refused with exit 2 too, naming why, so nothing is silently
ignored. Sources: test/fakeray/SOURCES.md.
"""

import sys

# name -> (type, default). type: "flag", "int", "str", "bool".
MODELLED = {
    "node-ip-address": ("str", None),
    "address": ("str", None),
    "port": ("int", None),
    "node-name": ("str", None),
    "object-manager-port": ("int", None),
    "node-manager-port": ("int", 0),
    "min-worker-port": ("int", 10002),
    "max-worker-port": ("int", 19999),
    "worker-port-list": ("str", None),
    "num-cpus": ("int", None),
    "num-gpus": ("int", None),
    "resources": ("str", "{}"),
    "head": ("flag", False),
    "include-dashboard": ("bool", None),
    "dashboard-host": ("str", "127.0.0.1"),
    "dashboard-port": ("int", None),
    "dashboard-agent-listen-port": ("int", 52365),
    "dashboard-agent-grpc-port": ("int", None),
    "runtime-env-agent-port": ("int", None),
    "block": ("flag", False),
    "temp-dir": ("str", None),
    "metrics-export-port": ("int", None),
    "disable-usage-stats": ("flag", False),
    "labels": ("str", ""),
    "ray-client-server-port": ("int", 10001),
    # Taken and unused: the stand-in keeps no GCS store (head up passes
    # its Redis's password on Ray before 2.60).
    "redis-password": ("str", ""),
}

# The rest of Ray's `start` options (master, 2026-02).
UNMODELLED = {
    "redis-username", "redis-shard-ports",
    "memory", "object-store-memory", "plasma-directory",
    "object-spilling-directory", "autoscaling-config", "no-redirect-output", "system-config",
    "enable-object-reconstruction", "no-monitor", "tracing-startup-hook",
    "ray-debugger-external", "labels-file", "include-log-monitor",
    "enable-resource-isolation", "system-reserved-cpu", "system-reserved-memory", "cgroup-path",
}

# Options that appeared in a release: older versions reject them as unknown.
SINCE = {"runtime-env-agent-port": (2, 8)}

BOOLS = {"1": True, "true": True, "t": True, "yes": True, "y": True, "on": True,
         "0": False, "false": False, "f": False, "no": False, "n": False, "off": False}


class UsageError(Exception):
    """click's UsageError: printed with the usage line, exit 2."""


def version_tuple(v):
    parts = []
    for p in v.split(".")[:3]:
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def parse_start(args, version):
    """Return {option-name: value} for every modelled option (defaults
    filled in) plus "_given": the names given on the command line."""
    opts = {k: d for k, (_, d) in MODELLED.items()}
    given = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("--"):
            raise UsageError("Got unexpected extra argument (%s)" % a)
        name, eq, value = a[2:].partition("=")
        since = SINCE.get(name)
        if name in UNMODELLED:
            raise UsageError("fakeray: --%s is Ray's, but the stand-in does not model it" % name)
        if name not in MODELLED or (since and version_tuple(version) < since):
            raise UsageError("No such option: --%s" % name)
        kind = MODELLED[name][0]
        if kind == "flag":
            if eq:
                raise UsageError("Option '--%s' does not take a value." % name)
            opts[name] = True
        else:
            if not eq:
                if i >= len(args):
                    raise UsageError("Option '--%s' requires an argument." % name)
                value = args[i]
                i += 1
            opts[name] = convert(name, kind, value)
        given.append(name)
    opts["_given"] = given
    return opts


def convert(name, kind, value):
    if kind == "int":
        try:
            return int(value.strip())
        except ValueError:
            raise UsageError("Invalid value for '--%s': '%s' is not a valid integer." % (name, value)) from None
    if kind == "bool":
        v = BOOLS.get(value.strip().lower())
        if v is None:
            raise UsageError("Invalid value for '--%s': '%s' is not a valid boolean." % (name, value))
        return v
    return value


def usage_error(msg):
    sys.stderr.write("Usage: ray start [OPTIONS]\nTry 'ray start --help' for help.\n\nError: %s\n" % msg)
    return 2
