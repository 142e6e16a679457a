// Package wire holds every JSON shape that crosses a process boundary in
// rayvast, once: the enrollment request and bundle (docs/protocol.md §6), heartbeats and
// reports on port B (§7), the head's config file and admin API (§8), and the
// guest API's app and sys-config files (§9). Head, agent and tools import it;
// it imports nothing of theirs.
//
// Protocol history (Version and Revision): one entry per change to the wire, oldest
// first, numbered from 1 without gaps; [Revision] is the newest entry's number. An
// entry is additive (a reader that does not know it loses nothing it relied on)
// unless it says it changes a meaning or a behaviour. Entries 2 to 10 are what
// Version 2, which cannot talk to 1, brought; entries from 11 on came later, additive
// within Version 2 except where they say otherwise.
//
//   - 1: Version 1, the first: enroll, heartbeat, report, admin API v1.
//   - 2: Version 2: the enroll request gains gpu_models, ray_version, python_version.
//   - 3: The bundle gains candidate_id, node_type, ray.node_name, ray.num_cpus.
//   - 4: Rejection reasons gpu_model, ray_version, shared_ip.
//   - 5: Report events ray_restarted and ray_crashloop.
//   - 6: An enrollment retry with the same token and port_key is answered
//     (docs/protocol.md §6 step 2).
//   - 7: Config gains ray.version, ray.python_version, node_types.*.gpu_model and
//     cpus, provider, max_dph_total and public_logs.
//   - 8: Admin API candidates gain dph_total and rented_at (and the patch dph_total):
//     what a rental costs.
//   - 9: The provider block gains intervals_s, and for the docker provider hairpin
//     and per_ip.
//   - 10: `agent check` (CheckReport, and the guest API's tcb checks) gains
//     ray_version and python_version.
//   - 11: /enroll may answer 503 {"error":"busy"} (with Retry-After) when the head
//     had no port check turn in time; the agent retries a 5xx with the same request anyway.
//   - 12: Admin API candidates gain reported: a rejected agent's checks.
//   - 13: Changes a behaviour, the port check's close order (internal/portcheck): the head
//     closes each connection once it has the reply line, and the agent closes only after the
//     head's close, so no agent port is left in TCP TIME_WAIT for Ray; a head of this version
//     still takes an old agent's close-first answer.
//   - 14: (issue 22) The heartbeat reply gains ray_head {"id"} while the head's Ray
//     head runs.
//   - 15: (issue 22) A node whose Ray joined a Ray head no longer named ends its Ray at
//     once, heartbeats every second until one is named and then starts Ray (another ID
//     named outright restarts it at once).
//   - 16: (issue 22) Changes a meaning: ray.state "running" now means the node joined
//     Ray's cluster ("starting" until then, after every restart too).
//   - 17: (issue 22) Report event ray_not_joined (Ray's last words when it did not join
//     within the agent's bound).
//   - 18: Admin API nodes gain ray_report {event, detail, at}: the node's last report of
//     its Ray, kept in the head's memory.
//   - 19: (issue 30, the mesh) The bundle gains mesh {port}, the eighth-lowest of the 64
//     (worker ports start at the ninth). Mesh wire: agent/mesh's package comment.
//   - 20: (issue 30) The heartbeat gains mesh_version and its reply mesh {version,
//     peers: [{instance_id, public_ip, mesh_port, ports}]} when the membership changed.
//   - 21: (issue 30) Admin API nodes gain mesh_port and ports.
//   - 22: (issue 31) Config unheard_limit_s (default 1800, 0 never) reaches the bundle's
//     heartbeat.unheard_limit_s; a node unheard that long ends its own rental.
//   - 23: (issue 31) Port B's 403 for an unknown or ended instance carries the header
//     Rayvast-Node-Status: unknown (its body stays {"error":"forbidden"}), and the node
//     ends its rental at once.
//   - 24: (issue 31) Admin API nodes gain unheard_limit_s.
//   - 25: (issue 31) The vast provider block gains node_types.*.interruptible
//     {max_bid_dph, margin}, replace_before_end_s and price_increase_max_dph.
//   - 26: (issue 31) GET /v1/provider gains rentals [{instance_id, candidate_id, bid_dph,
//     ondemand_dph, end_date, price_increase {old_dph, new_dph, action, at}}].
//   - 27: (issue 42) GET /v1/provider's rentals[].price_increase gains applies_at (the
//     contract's end date: an accepted price is charged, a rental ending over the cap
//     ends, from then on); rentals[].ondemand_dph becomes offer_dph (a bid search's
//     dph_total is at the minimum bid, not the on-demand price) and storage_dph is added
//     (a bid's storage, billed on top of the bid). The bundle's heartbeat gains self_end
//     ("vast" when the head rents on vast: the node warns when it lacks CONTAINER_API_KEY).
//   - 28: (issue 43) Changes a meaning: with the GCS's store (every Ray head head up
//     runs), ray_head names the store's ID from the first start on, also while the Ray
//     head starts or restarts; the same ID named means the same Ray cluster, and the
//     agent leaves its Ray be (its raylet waits for the GCS). The agent sets
//     RAY_gcs_rpc_server_reconnect_timeout_s=120 in Ray's env unless its own env has it.
//   - 29: (issue 43) The heartbeat reply gains drain {deadline} while the head drains the
//     node before a planned end; a node told so does not start Ray again once it exits
//     (it asks with a heartbeat at once when Ray exits, before any restart), and starts it
//     again only if a later answer no longer names the drain. Changes a behaviour: the
//     agent now reads the heartbeat reply ignoring fields it does not know (DecodeTolerant),
//     so later additions reach it; an agent of an earlier revision fails to read a reply
//     that carries drain and counts that heartbeat failed (the head heard it; the node
//     ends by the deadline as before, its Ray restarted after the drain).
//
// Head and agent must speak the same version: the head serves the agent it
// was built with at /bootstrap, and refuses any other version with 400.
//
// Fields that carry secrets are plain strings here because this is the wire.
// Types holding them redact themselves in %v and slog (see redact.go); code
// that keeps a secret after decoding converts it to secret.String at once.
package wire

// Version is the single protocol version spoken by head and agent.
const Version = 2

// Revision is the number of the newest entry in the protocol history of this
// package's comment. The revision grows with every wire change; Version grows only
// when old and new cannot talk. TestProtocolHistory holds the two together.
const Revision = 29

// Environment variable names of the rental request (docs/protocol.md §2).
const (
	EnvHead            = "RAYVAST_HEAD"
	EnvPortA           = "RAYVAST_PORT_A"
	EnvPortB           = "RAYVAST_PORT_B"
	EnvBootstrapSHA256 = "RAYVAST_BOOTSTRAP_SHA256"
	EnvCASHA256        = "RAYVAST_CA_SHA256"
	EnvJoinToken       = "RAYVAST_JOIN_TOKEN"
	EnvInstanceID      = "RAYVAST_INSTANCE_ID"
	EnvPublicIP        = "RAYVAST_PUBLIC_IP"
	EnvPorts           = "RAYVAST_PORTS"
	EnvEgressResolvers = "RAYVAST_EGRESS_RESOLVERS"
	EnvPublicLogs      = "RAYVAST_PUBLIC_LOGS"
	EnvPublicSysinfo   = "RAYVAST_PUBLIC_SYSINFO"
	EnvPublicTCBInfo   = "RAYVAST_PUBLIC_TCBINFO"
	EnvPython          = "RAYVAST_PYTHON"
	EnvState           = "RAYVAST_STATE"

	// Optional knobs of the agent's Ray restart policy (docs/protocol.md §9); the
	// agent's defaults apply when unset.
	EnvRayMaxRestarts   = "RAYVAST_RAY_MAX_RESTARTS"   // restarts allowed in the window
	EnvRayRestartWindow = "RAYVAST_RAY_RESTART_WINDOW" // Go duration, e.g. 10m
	EnvRayRestartDelay  = "RAYVAST_RAY_RESTART_DELAY"  // first backoff, doubling

	// EnvVastURL is where the agent reaches vast's API to end its own
	// instance (docs/protocol.md §9); unset: https://console.vast.ai. tools/fakevast
	// sets it; vast does not.
	EnvVastURL = "RAYVAST_VAST_URL"

	// Set by vast itself; the RAYVAST_ names above win over these.
	EnvVastContainerID = "CONTAINER_ID"
	EnvVastPublicIP    = "PUBLIC_IPADDR"
	EnvVastPortPrefix  = "VAST_TCP_PORT_" // + 70000 … 70063
	EnvVastGPUCount    = "GPU_COUNT"
	EnvVastAPIKey      = "CONTAINER_API_KEY" // a secret
)

// PortCount is how many ports a candidate opens (vast's 70000…70063).
const PortCount = 64

// VastPortBase is the first of vast's 64 requested port numbers.
const VastPortBase = 70000
