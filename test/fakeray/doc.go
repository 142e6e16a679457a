// Package fakeray checks the stand-in ray Python package beside it (ray/,
// see README.md) that the bootloader and agent tests put on PYTHONPATH in
// place of real Ray. There is no Go code to import.
package fakeray
