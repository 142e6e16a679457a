package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/rayvast/rayvast/head/agentbin"
)

// runVersion is `head version`: the SHA-256 of this binary and of the agent
// it serves at /bootstrap unless --agent replaces it.
func runVersion(stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "head version: %v\n", err)
		return 1
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		fmt.Fprintf(stderr, "head version: %v\n", err)
		return 1
	}
	sum := sha256.Sum256(b)
	fmt.Fprintf(stdout, "head sha256:  %s\n", hex.EncodeToString(sum[:]))
	if a := agentbin.SHA256(); a != "" {
		fmt.Fprintf(stdout, "agent sha256: %s (built in)\n", a)
	} else {
		fmt.Fprintf(stdout, "agent sha256: none built in: %v\n", agentbin.ErrNone)
	}
	return 0
}
