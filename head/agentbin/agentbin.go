// Package agentbin holds the agent binary built into head, so deploying the
// head is one file. build.sh builds the agent first and copies it to
// agent_built.bin here (git-ignored) before building head; a head built
// otherwise (go build ./...) embeds only the committed empty placeholder and
// must be given --agent.
package agentbin

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
)

//go:embed agent*.bin
var files embed.FS

// ErrNone says this head was built without the agent.
var ErrNone = errors.New("this head was built without the agent (go build, not ./build.sh): pass --agent FILE, or build with ./build.sh")

// Agent returns the embedded agent binary, or ErrNone.
func Agent() ([]byte, error) {
	b, err := files.ReadFile("agent_built.bin")
	if err != nil || len(b) == 0 {
		return nil, ErrNone
	}
	return b, nil
}

// SHA256 is the hex SHA-256 of the embedded agent, or "" when there is none.
func SHA256() string {
	b, err := Agent()
	if err != nil {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
