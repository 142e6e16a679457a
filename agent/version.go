package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
)

func versionCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if isHelp(args[0]) {
			fmt.Fprint(stdout, "usage: agent version\n\nPrints the agent's version, Go version and the SHA-256 of this binary\n(compare it with RAYVAST_BOOTSTRAP_SHA256).\n")
			return 0
		}
		fmt.Fprintf(stderr, "agent version: takes no arguments\n")
		return 2
	}
	sum, err := selfSHA256()
	if err != nil {
		sum = "unknown (" + err.Error() + ")"
	}
	fmt.Fprintf(stdout, "agent %s %s %s/%s\nsha256 %s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, sum)
	return 0
}

// selfSHA256 hashes the running binary: what the head served at /bootstrap.
func selfSHA256() (string, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "-help" || s == "help" }
