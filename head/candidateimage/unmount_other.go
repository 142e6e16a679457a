//go:build !linux

package candidateimage

// unmountUnder has nothing to do where debootstrap does not run (it needs
// Linux mounts).
func unmountUnder(dir string) {}
