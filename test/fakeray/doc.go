// Package fakeray is the stand-in Ray beside it (ray/, native/; see
// README.md and SOURCES.md) that the bootloader, agent and e2e tests put on
// PYTHONPATH in place of real Ray. Go code here only builds its native
// programs (BuildNatives) for tests that run it.
package fakeray
