// Package portcheck is the port check of docs/protocol.md §6 step 7: the head proves that
// each of a candidate's 64 ports reaches the candidate's own agent.
//
// The head connects to every port and sends "RAYVAST-PORTCHECK <nonce>\n";
// the agent answers "<hex HMAC-SHA256(port_key, "<nonce>:<port>")>\n". The
// head closes first, once it has the line; the agent closes when it sees the
// head's close (so no port of the agent is left in TCP TIME_WAIT). A fresh nonce per port and the port inside the MAC mean an answer
// cannot be replayed on another port or in another check, and only a holder
// of the port_key sent at enrollment can answer at all.
//
// Check is the head's half, Listen the agent's.
package portcheck

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

const (
	challengePrefix = "RAYVAST-PORTCHECK "
	nonceBytes      = 16
	nonceHexLen     = 2 * nonceBytes
	// challengeLen is the whole challenge line with its newline.
	challengeLen = len(challengePrefix) + nonceHexLen + 1
	// replyLen is the whole reply: 64 hex chars of HMAC-SHA256 and a newline.
	replyLen = 2*sha256.Size + 1
)

// Response is the agent's answer to nonce on port, without the newline:
// lowercase hex of HMAC-SHA256(portKey, "<nonce>:<port>").
func Response(portKey []byte, nonce string, port int) string {
	m := hmac.New(sha256.New, portKey)
	m.Write([]byte(nonce + ":" + strconv.Itoa(port)))
	return hex.EncodeToString(m.Sum(nil))
}

// challenge is the line the head sends for nonce.
func challenge(nonce string) string { return challengePrefix + nonce + "\n" }

// parseChallenge returns the nonce of line, which must be exactly
// "RAYVAST-PORTCHECK " + 32 lowercase hex chars + "\n" and nothing else.
func parseChallenge(line []byte) (nonce string, ok bool) {
	if len(line) != challengeLen || string(line[:len(challengePrefix)]) != challengePrefix || line[len(line)-1] != '\n' {
		return "", false
	}
	n := line[len(challengePrefix) : len(line)-1]
	if !isLowerHex(n) {
		return "", false
	}
	return string(n), true
}

// isLowerHex reports whether b is non-empty and only [0-9a-f]: what
// hex.EncodeToString produces. Uppercase is refused so there is exactly one
// valid spelling of each value.
func isLowerHex(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
