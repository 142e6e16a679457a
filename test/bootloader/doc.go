// Package bootloader holds the black-box tests of the repository's
// bootloader.sh (docs/protocol.md §3): they run the script under dash, bash and busybox
// ash against a local HTTPS "head" and a stand-in agent, with test/fakeray
// as the ray package the script looks for. There is no Go code to import.
package bootloader
