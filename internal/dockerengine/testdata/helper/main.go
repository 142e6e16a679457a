// Command helper is the whole filesystem of the test image: it prints one
// line to each stream, then waits for SIGTERM and exits 7, so a test can see
// logs, stop and exit codes cross the container boundary.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	fmt.Fprintln(os.Stdout, "hello stdout", os.Getenv("HELPER_GREETING"))
	fmt.Fprintln(os.Stderr, "hello stderr")
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch
	os.Exit(7)
}
