"""Ray autoscaler external node provider for rayvast.

Maps Ray's NodeProvider calls to the head's admin API (docs/protocol.md §8), JSON
over HTTP on the Unix socket STATE/admin.sock:

    create_node     -> POST   /v1/candidates {"node_type": ...}   (count times)
    terminate_node  -> DELETE /v1/candidates/{candidate_id}
    non_terminated_nodes, is_running, is_terminated, node_tags,
    external_ip, internal_ip -> GET /v1/candidates, and GET /v1/nodes for
                               whether an enrolled node's Ray has joined

A Ray node ID is a rayvast candidate ID: the agent starts each node's Ray
with RAY_CLOUD_INSTANCE_ID set to it, the only link Ray's v2 autoscaler
makes between a Ray node and a provider node. The Ray head that `head up`
runs is listed too, as node "head" of kind head (RAY_CLOUD_INSTANCE_ID=head):
v1 takes the head from the listing and v2 scales only once a head instance
runs. The head's built-in provider
(`head serve --provider vast|docker`) rents the instance of each candidate;
with `--provider none` another tool must rent it and PATCH the candidate
(attach_rental: on a blocklisted host the candidate is deleted and
HostBlocklisted raised, so the renter ends that rental).

Ray cluster YAML:

    provider:
      type: external
      module: rayvast_autoscaler.RayvastNodeProvider
      admin_socket: /var/lib/rayvast/admin.sock
      disable_node_updaters: true        # no SSH: the agent starts Ray
      disable_launch_config_check: true  # a monitor restart ends nothing

The complete file is example.yaml beside this module; `head up` writes one
for its cluster (STATE/autoscaler.yaml) and, with the config's autoscaler
block, starts the Ray head with it and this module (built into head) on
its PYTHONPATH.

Tag names and statuses are Ray's own (ray.autoscaler.tags) when Ray is
importable. A create the head refuses reaches Ray as its
NodeLaunchException. A candidate's IP is Ray's only once it enrolls.

The join token the head returns on create is dropped at once: it is the
head's business to hand it to the rental, never the autoscaler's to log.
"""

import http.client
import json
import logging
import socket
import sys
import threading
import urllib.parse

try:  # Ray's base class when Ray is installed; a stand-in otherwise.
    from ray.autoscaler.node_provider import NodeProvider
except ImportError:  # pragma: no cover - exercised only without Ray

    class NodeProvider:  # minimal shape of ray.autoscaler.node_provider.NodeProvider
        def __init__(self, provider_config, cluster_name):
            self.provider_config = provider_config
            self.cluster_name = cluster_name


try:  # Ray's way for a provider to say why a launch failed.
    from ray.autoscaler.node_launch_exception import NodeLaunchException
except ImportError:  # pragma: no cover - exercised only without Ray
    NodeLaunchException = None

logger = logging.getLogger(__name__)

try:  # Ray's own tag names and statuses: what its autoscalers read.
    from ray.autoscaler import tags as _ray_tags
except ImportError:  # pragma: no cover - exercised only without Ray
    _ray_tags = None

# What Ray 2.52-2.60's ray.autoscaler.tags says, used only without Ray
# (test_with_ray checks each against the real module). Ray's key for a
# node's kind is "ray-node-type" ("for legacy reasons", says its tags.py).
RAY_TAGS_WITHOUT_RAY = {
    "TAG_RAY_NODE_KIND": "ray-node-type",
    "TAG_RAY_USER_NODE_TYPE": "ray-user-node-type",
    "TAG_RAY_NODE_STATUS": "ray-node-status",
    "TAG_RAY_NODE_NAME": "ray-node-name",
    "NODE_KIND_WORKER": "worker",
    "NODE_KIND_HEAD": "head",
    "STATUS_UP_TO_DATE": "up-to-date",
    "STATUS_UNINITIALIZED": "uninitialized",
    "STATUS_SETTING_UP": "setting-up",
    "STATUS_WAITING_FOR_SSH": "waiting-for-ssh",
    "STATUS_UPDATE_FAILED": "update-failed",
}


def _ray_name(name):
    if _ray_tags is not None and hasattr(_ray_tags, name):
        return getattr(_ray_tags, name)
    return RAY_TAGS_WITHOUT_RAY[name]


TAG_RAY_NODE_KIND = _ray_name("TAG_RAY_NODE_KIND")
TAG_RAY_USER_NODE_TYPE = _ray_name("TAG_RAY_USER_NODE_TYPE")
TAG_RAY_NODE_STATUS = _ray_name("TAG_RAY_NODE_STATUS")
TAG_RAY_NODE_NAME = _ray_name("TAG_RAY_NODE_NAME")
NODE_KIND_WORKER = _ray_name("NODE_KIND_WORKER")
NODE_KIND_HEAD = _ray_name("NODE_KIND_HEAD")
STATUS_UP_TO_DATE = _ray_name("STATUS_UP_TO_DATE")
STATUS_UNINITIALIZED = _ray_name("STATUS_UNINITIALIZED")
STATUS_SETTING_UP = _ray_name("STATUS_SETTING_UP")
STATUS_WAITING_FOR_SSH = _ray_name("STATUS_WAITING_FOR_SSH")
STATUS_UPDATE_FAILED = _ray_name("STATUS_UPDATE_FAILED")
HEAD_NODE_ID = "head"  # the Ray head's RAY_CLOUD_INSTANCE_ID (head/rayhead)
HEAD_NODE_TYPE = "head"

# Candidate states (docs/protocol.md §8).
LIVE_STATES = ("pending", "rented", "running", "enrolled", "lost")
RUNNING_STATES = ("running", "enrolled")
# Ray's v1 autoscaler keys what it knows of a node (last used, last
# heartbeat) by IP, and public IPs are reused: a new rental may get the IP
# of one that just ended, whose idle time Ray still holds. A candidate's IP
# is told to Ray only once its node is the one at that IP (enrolled); until
# then Ray forgets the old node's entry (it prunes IPs no node lists).
IP_STATES = ("enrolled", "lost")

_STATUS_BY_STATE = {
    "pending": STATUS_UNINITIALIZED,
    "rented": STATUS_UNINITIALIZED,
    "running": STATUS_WAITING_FOR_SSH,  # rented and reachable, not enrolled yet
    "enrolled": STATUS_SETTING_UP,  # up-to-date once its Ray has joined
    "lost": STATUS_UPDATE_FAILED,
}
RAY_JOINED = "running"  # a node's Ray state once Ray lists it (wire.RayRunning)


def _status_of(c):
    """Ray's status for a candidate. An enrolled node is up-to-date only once
    its Ray has joined the cluster: v1 counts an up-to-date node without a
    Ray heartbeat as unhealthy after AUTOSCALER_HEARTBEAT_TIMEOUT_S and ends
    it, so a node still starting Ray is "setting-up" (pending) instead."""
    state = c.get("state")
    if state == "enrolled" and c.get("ray_state") == RAY_JOINED:
        return STATUS_UP_TO_DATE
    return _STATUS_BY_STATE.get(state, STATUS_UNINITIALIZED)


class AdminError(Exception):
    """A non-success answer of the admin API."""

    def __init__(self, method, path, status, body):
        super().__init__("admin %s %s: HTTP %d: %s" % (method, path, status, body[:300]))
        self.status = status
        self.code = ""  # the head's "error" field, e.g. "host_blocklisted"
        try:
            parsed = json.loads(body)
            if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
                self.code = parsed["error"]
        except ValueError:
            pass


class HostBlocklisted(AdminError):
    """The head refused a rental on a blocklisted host; the candidate was
    deleted (its join token is dead) and the rental must be ended."""


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("admin", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class AdminClient:
    """The head's admin API on its Unix socket."""

    def __init__(self, socket_path, timeout=30.0):
        self.socket_path = socket_path
        self.timeout = timeout

    def call(self, method, path, body=None, want=(200,)):
        conn = _UnixHTTPConnection(self.socket_path, self.timeout)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        if resp.status not in want:
            raise AdminError(method, path, resp.status, raw.decode("utf-8", "replace"))
        return json.loads(raw) if raw else None

    def candidates(self):
        return self.call("GET", "/v1/candidates") or []

    def nodes(self):
        return self.call("GET", "/v1/nodes") or []

    def create(self, node_type):
        created = self.call("POST", "/v1/candidates", {"node_type": node_type}, want=(201,))
        return created["candidate_id"]  # join_token and env deliberately dropped

    def patch(self, candidate_id, fields):
        path = "/v1/candidates/" + urllib.parse.quote(candidate_id, safe="")
        return self.call("PATCH", path, fields, want=(200,))

    def delete(self, candidate_id):
        path = "/v1/candidates/" + urllib.parse.quote(candidate_id, safe="")
        try:
            self.call("DELETE", path, want=(204,))
        except AdminError as e:
            if e.status != 404:  # already gone: terminated is terminated
                raise


class RayvastNodeProvider(NodeProvider):
    """Ray NodeProvider backed by the rayvast head's admin API."""

    def __init__(self, provider_config, cluster_name):
        super().__init__(provider_config, cluster_name)
        self.provider_config = provider_config
        self.cluster_name = cluster_name
        sock = provider_config.get("admin_socket")
        if not sock:
            raise ValueError("rayvast provider: provider.admin_socket is required")
        self.admin = AdminClient(sock, float(provider_config.get("timeout_s", 30)))
        self._lock = threading.Lock()
        self._tags = {}  # candidate_id -> tags Ray set on it
        self._cache = {}  # candidate_id -> candidate, from the last listing

    # -- reading --------------------------------------------------------
    def _refresh(self):
        cands = self.admin.candidates()
        # Each enrolled candidate's node says whether its Ray has joined.
        ray = {n.get("candidate_id"): (n.get("ray") or {}).get("state") for n in self.admin.nodes()}
        for c in cands:
            c["ray_state"] = ray.get(c["candidate_id"])
        with self._lock:
            self._cache = {c["candidate_id"]: c for c in cands}
        # destroy_requested: the head wants this candidate ended and an
        # external provider owns it; ending it is our part.
        # A failed DELETE must not break Ray's listing: the candidate is
        # still destroy_requested and is tried again on the next listing.
        for c in cands:
            if c.get("state") == "destroy_requested":
                try:
                    self.admin.delete(c["candidate_id"])
                except (AdminError, OSError) as e:
                    logger.warning("rayvast provider: end %s: %s", c["candidate_id"], e)
        return cands

    def _get(self, node_id):
        with self._lock:
            c = self._cache.get(node_id)
        if c is None:
            self._refresh()
            with self._lock:
                c = self._cache.get(node_id)
        return c

    def _tags_of(self, c):
        node_id = c["candidate_id"]
        with self._lock:
            tags = dict(self._tags.get(node_id, {}))
        # What the head knows wins over what Ray stored: Ray tags a new node
        # "uninitialized" and, with node updaters disabled, never changes
        # it; the node would never be up-to-date and v1 would never end an
        # unhealthy one.
        tags.update({
            TAG_RAY_NODE_KIND: NODE_KIND_WORKER,
            TAG_RAY_USER_NODE_TYPE: c.get("node_type", ""),
            TAG_RAY_NODE_STATUS: _status_of(c),
        })
        tags.setdefault(TAG_RAY_NODE_NAME, "rayvast-%s-%s" % (self.cluster_name, node_id))
        return tags

    def _head_tags(self):
        return {
            TAG_RAY_NODE_KIND: NODE_KIND_HEAD,
            TAG_RAY_USER_NODE_TYPE: self.provider_config.get("head_node_type", HEAD_NODE_TYPE),
            TAG_RAY_NODE_STATUS: STATUS_UP_TO_DATE,  # the autoscaler runs on it
            TAG_RAY_NODE_NAME: "rayvast-%s-head" % self.cluster_name,
        }

    def non_terminated_nodes(self, tag_filters):
        out = []
        want = (tag_filters or {}).items()
        if all(self._head_tags().get(k) == v for k, v in want):
            out.append(HEAD_NODE_ID)
        for c in self._refresh():
            if c.get("state") not in LIVE_STATES:
                continue
            tags = self._tags_of(c)
            if all(tags.get(k) == v for k, v in want):
                out.append(c["candidate_id"])
        return out

    def is_running(self, node_id):
        if node_id == HEAD_NODE_ID:
            return True
        c = self._get(node_id)
        return c is not None and c.get("state") in RUNNING_STATES

    def is_terminated(self, node_id):
        if node_id == HEAD_NODE_ID:
            return False
        c = self._get(node_id)
        return c is None or c.get("state") not in LIVE_STATES

    def node_tags(self, node_id):
        if node_id == HEAD_NODE_ID:
            return self._head_tags()
        c = self._get(node_id)
        if c is None:
            return {}
        return self._tags_of(c)

    def external_ip(self, node_id):
        if node_id == HEAD_NODE_ID:
            return self.provider_config.get("head_ip") or None
        c = self._get(node_id) or {}
        if c.get("state") not in IP_STATES:
            return None
        return c.get("public_ip") or None

    def internal_ip(self, node_id):
        # vast hosts share no private network: Ray reaches nodes at their
        # public IP (the agent starts Ray with --node-ip-address=public IP).
        return self.external_ip(node_id)

    # -- writing --------------------------------------------------------
    def create_node(self, node_config, tags, count):
        node_type = tags.get(TAG_RAY_USER_NODE_TYPE) or (node_config or {}).get("node_type")
        if not node_type:
            raise ValueError("rayvast provider: no node type (tag %s or node_config.node_type)" % TAG_RAY_USER_NODE_TYPE)
        created = {}
        for _ in range(count):
            try:
                node_id = self.admin.create(node_type)
            except AdminError as e:
                # Ray's v1 autoscaler records a NodeLaunchException against
                # the node type (shown under "Recent failures" and kept out
                # of its plans for a while); a plain exception is only logged.
                # The head refuses e.g. a paused type (node_type_paused).
                if NodeLaunchException is None:
                    raise
                raise NodeLaunchException(e.code or "admin_error", str(e), sys.exc_info()) from e
            with self._lock:
                self._tags[node_id] = dict(tags)
                self._cache[node_id] = {"candidate_id": node_id, "node_type": node_type, "state": "pending"}
            created[node_id] = {"candidate_id": node_id, "node_type": node_type}
        return created

    def create_node_with_resources_and_labels(self, node_config, tags, count, resources, labels):
        """What Ray's v1 NodeLauncher and v2 NodeProviderAdapter call. The
        resources and labels are the node type's, which the head's config
        already gives the node (the agent starts Ray with them)."""
        return self.create_node(node_config, tags, count)

    def attach_rental(self, node_id, instance_id=None, public_ip=None, host_id=None):
        """Record what a renter learned of a candidate's rental (PATCH, for
        `head serve --provider none` with a renter built on this module).

        If the head refuses the host as blocklisted (409 host_blocklisted),
        the candidate is deleted so its join token dies, and HostBlocklisted
        is raised: the caller must end the rental it made.
        """
        fields = {k: v for k, v in (("instance_id", instance_id), ("host_id", host_id), ("public_ip", public_ip)) if v}
        try:
            c = self.admin.patch(node_id, fields)
        except AdminError as e:
            if e.status != 409 or e.code != "host_blocklisted":
                raise
            self.terminate_node(node_id)
            raise HostBlocklisted("PATCH", "/v1/candidates/" + node_id, e.status, str(e)) from e
        with self._lock:
            self._cache[node_id] = c
        return c

    def set_node_tags(self, node_id, tags):
        if node_id == HEAD_NODE_ID:
            return
        with self._lock:
            self._tags.setdefault(node_id, {}).update(tags)

    def terminate_node(self, node_id):
        if node_id == HEAD_NODE_ID:
            # The Ray head is head up's to stop, never the autoscaler's.
            logger.warning("rayvast provider: not terminating the head node")
            return None
        self.admin.delete(node_id)
        with self._lock:
            self._tags.pop(node_id, None)
            c = self._cache.get(node_id)
            if c is not None:
                c["state"] = "ended"
        return None

    def terminate_nodes(self, node_ids):
        for node_id in node_ids:
            self.terminate_node(node_id)
        return None

    def post_process(self):
        return None

    def safe_to_scale(self):
        return True

    def is_readonly(self):
        return False

    @staticmethod
    def bootstrap_config(cluster_config):
        return cluster_config
