// Package candidateimage builds the image a local candidate runs: a base
// (Debian minbase from debootstrap, else the host's own python3 and shell
// tools) plus either the stand-in Ray of test/fakeray or real Ray of a
// given version, copied from a venv of this machine. Tags are hashes of the
// inputs, so an image is built once per machine and reused after.
//
// The docker provider rents containers of it; `head up`/`serve` ask for it
// when no image is set, and the demo, tools/fakevast and the tests build it
// directly.
package candidateimage
