package wire

// NodeStatusHeader on port B's 403 for a certificate whose instance the
// head has not enrolled or has ended carries NodeUnknown (issue 31): the
// node ends its own rental at once on it (docs/protocol.md §9). The body stays docs/protocol.md
// §7's {"error":"forbidden"}, the same as every other port B refusal.
const (
	NodeStatusHeader = "Rayvast-Node-Status"
	NodeUnknown      = "unknown"
)
