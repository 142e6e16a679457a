"""Ray's own checks of `ray start`'s options and environment, each an exit 1
in Ray (an uncaught exception or cli_logger.abort). Each function names the
Ray source it follows; the table is test/fakeray/SOURCES.md.
"""

import json
import os
import re

from ray.scripts.cli import version_tuple

LABEL_RE = r"([a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?)"
LABEL_PREFIX_RE = r"^(%s?(\.%s?)*)$" % (LABEL_RE, LABEL_RE)
RESERVED_LABEL_PREFIX = "ray.io/"
DEFAULT_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


class Abort(Exception):
    """An exit-1 failure of `ray start`."""


def resources(text):
    """utils.parse_resources_json, then resource_and_label_spec's checks:
    a JSON object of numbers, whole, non-negative, no default resource."""
    try:
        res = json.loads(text)
        if not isinstance(res, dict):
            raise ValueError("The format after deserialization is not a dict")
    except ValueError as e:
        raise Abort("`--resources=%s` is not a valid JSON string, detail error:%s" % (text, e))
    for k, v in res.items():
        if k in DEFAULT_RESOURCES:
            raise Abort("%s -> `%s` cannot be a custom resource because it is one of the default resources" % (res, k))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Abort("%s (%s): %s" % (k, type(v), v))
        if isinstance(v, float) and not v.is_integer():
            raise Abort("Resource quantities must all be whole numbers. Violated by resource '%s' in %s." % (k, res))
        if v < 0:
            raise Abort("Resource quantities must be nonnegative. Violated by resource '%s' in %s." % (k, res))
    return res


def labels(text):
    """scripts.start: label_utils.parse_node_labels_string first, then the
    deprecated JSON form (parse_node_labels_json, which refuses `ray.io/`);
    both failing aborts with the string form's error."""
    try:
        return labels_string(text), "string"
    except ValueError as string_err:
        try:
            return labels_json(text), "json"
        except ValueError:
            raise Abort("`--labels=%s` is not a valid string of key-value pairs, detailed error: %s" % (text, string_err))


def labels_string(text):
    if len(text) > 1 and text.startswith('"') and text.endswith('"'):
        text = text[1:-1]
    out = {}
    if text == "":
        return out
    for pair in text.split(","):
        kv = pair.split("=")
        if len(kv) != 2:
            raise ValueError("Label string is not a key-value pair.")
        out[kv[0].strip()] = kv[1].strip()
    for k, v in out.items():
        label_syntax(k, v)
    return out


def label_syntax(key, value):
    """label_utils.validate_label_key / validate_label_value (Kubernetes syntax)."""
    name = key
    if "/" in key:
        prefix, name = key.rsplit("/", 1)
        if len(prefix) > 253 or not re.fullmatch(LABEL_PREFIX_RE, prefix):
            raise ValueError("Invalid label key prefix `%s`." % prefix)
    if len(name) > 63 or not re.fullmatch(LABEL_RE, name):
        raise ValueError("Invalid label key name `%s`." % name)
    if value != "" and (len(value) > 63 or not re.fullmatch(LABEL_RE, value)):
        raise ValueError("Invalid label key value `%s`." % value)


def labels_json(text):
    out = json.loads(text)
    if not isinstance(out, dict):
        raise ValueError("The format after deserialization is not a key-value pair map")
    for k, v in out.items():
        if not isinstance(v, str):
            raise ValueError('The value of the "%s" is not string type' % k)
        if k.startswith(RESERVED_LABEL_PREFIX):
            raise ValueError("Custom label keys `%s` cannot start with the prefix `%s`." % (k, RESERVED_LABEL_PREFIX))
    return out


def worker_ports(o):
    """parameter.RayParams._check_usage: the worker port list or range."""
    if o["worker-port-list"] is not None:
        ports = []
        for s in o["worker-port-list"].split(","):
            try:
                p = int(s)
            except ValueError as e:
                raise Abort("worker_port_list must be a comma-separated list of integers: %s" % e)
            if p < 1024 or p > 65535:
                raise Abort("Ports in worker_port_list must be between 1024 and 65535. Got: %d" % p)
            ports.append(p)
        return ports
    lo, hi = o["min-worker-port"], o["max-worker-port"]
    if lo != 0 and (lo < 1024 or lo > 65535):
        raise Abort("min_worker_port must be 0 or an integer between 1024 and 65535.")
    if hi != 0 and (hi < 1024 or hi > 65535):
        raise Abort("max_worker_port must be 0 or an integer between 1024 and 65535.")
    if hi != 0 and hi <= lo:
        raise Abort("max_worker_port must be higher than min_worker_port.")
    return list(range(lo, hi + 1)) if lo and hi else []


def other_params(o):
    """The rest of RayParams._check_usage."""
    rea = o["runtime-env-agent-port"]
    if rea is not None and rea != 0 and (rea < 1024 or rea > 65535):
        raise Abort("runtime_env_agent_port must be 0 (auto-assign) or an integer between 1024 and 65535.")
    if o["temp-dir"] is not None and not os.path.isabs(o["temp-dir"]):
        raise Abort("temp_dir must be absolute path or None.")


def distinct_ports(components):
    """RayParams._update_pre_selected_port: no port serves two components."""
    seen = {}
    for comp, ports in components.items():
        for p in ports:
            if p in seen:
                raise Abort("Ray component %s is trying to use a port number %d that is used by other components (%s)." % (comp, p, seen[p]))
            seen[p] = comp


def head_or_worker(o):
    """scripts.start: a worker needs --address and refuses head-only flags."""
    if o["head"]:
        return
    if o["address"] is None:
        raise Abort("`--address` is a required flag unless starting a head node with `--head`.")
    for flag in ("port", "include-dashboard"):
        if o[flag] is not None:
            raise Abort("--%s should only be specified when starting head node with `--head`." % flag)


def auth_token(version, env):
    """authentication_token_setup.ensure_token_if_auth_enabled with the C++
    AuthenticationTokenLoader (Ray 2.52+; older Ray ignores both variables):
    with RAY_AUTH_MODE=token a token must come from RAY_AUTH_TOKEN, else the
    first line of RAY_AUTH_TOKEN_PATH (set but unreadable or empty: an
    error), else ~/.ray/auth_token. Returns where it came from, or None."""
    if version_tuple(version) < (2, 52):
        return None
    if env.get("RAY_AUTH_MODE", "disabled").lower() != "token":
        return None
    if env.get("RAY_AUTH_TOKEN", ""):
        return "RAY_AUTH_TOKEN"
    path = env.get("RAY_AUTH_TOKEN_PATH", "")
    if path:
        if not first_line(path):
            raise Abort("RAY_AUTH_TOKEN_PATH is set but file cannot be opened or is empty: " + path)
        return "RAY_AUTH_TOKEN_PATH"
    if first_line(os.path.join(os.path.expanduser("~"), ".ray", "auth_token")):
        return "default_path"
    raise Abort("Token authentication is enabled but no authentication token was found.")


def first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


PEM_KINDS = {"RAY_TLS_SERVER_CERT": "CERTIFICATE", "RAY_TLS_SERVER_KEY": "PRIVATE KEY", "RAY_TLS_CA_CERT": "CERTIFICATE"}


def tls(env):
    """tls_utils.load_certs_from_env, run when `ray start` opens its first
    gRPC channel: with RAY_USE_TLS 1/true all three files must be set and
    readable; gRPC then needs PEM (a BEGIN line of the right kind)."""
    if env.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
        return False
    if any(v not in env for v in PEM_KINDS):
        raise Abort("If the environment variable RAY_USE_TLS is set to true then RAY_TLS_SERVER_CERT, "
                    "RAY_TLS_SERVER_KEY and RAY_TLS_CA_CERT must also be set.")
    for var, kind in PEM_KINDS.items():
        try:
            with open(env[var], "rb") as f:
                data = f.read()
        except OSError as e:
            raise Abort("%s: %s" % (var, e))
        if b"-----BEGIN " not in data or kind.encode() + b"-----" not in data:
            raise Abort("%s=%s: not a PEM %s (gRPC cannot load it)" % (var, env[var], kind))
    return True
