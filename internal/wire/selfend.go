package wire

// ErrUnknownNode is port B's 403 for a certificate whose instance the head
// has not enrolled or has ended (issue 31): the node ends its own rental
// at once on it (SPEC §9). Other 403s on port B say ErrForbidden.
const ErrUnknownNode = "unknown_node"
