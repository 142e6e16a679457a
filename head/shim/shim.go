// Package shim is the shim the head hands every node by default (docs/protocol.md §9):
// sitecustomize.py, the Python layer, carrying inside itself the native
// LD_PRELOAD libraries that build.sh compiled from native/natshim.c. One
// file on the wire; the node's Python writes the library out itself.
package shim

import (
	"bytes"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// Name is the file name Python loads by itself from PYTHONPATH.
const Name = "sitecustomize.py"

//go:embed sitecustomize.py
var python []byte

// native/lib holds build output (natshim-<arch>.so) and a committed README,
// so the pattern always matches and a fresh clone compiles.
//
//go:embed native/lib
var built embed.FS

// marker is the line of sitecustomize.py that Assemble replaces.
const marker = "NATIVE = ()  # rayvast:native\n"

// Default returns the built-in shim and the native libraries it carries
// (their file names; none when build.sh did not build them).
func Default() (content []byte, libs []string) {
	names, _ := fs.Glob(built, "native/lib/*.so")
	sort.Strings(names)
	var native [][]byte
	for _, n := range names {
		b, err := built.ReadFile(n)
		if err != nil {
			panic(err) // embedded: cannot fail
		}
		native = append(native, b)
		libs = append(libs, path.Base(n))
	}
	content, err := Assemble(native)
	if err != nil {
		panic(err) // the embedded file lacks its marker: a build defect
	}
	return content, libs
}

// Assemble returns sitecustomize.py carrying the native libraries.
func Assemble(native [][]byte) ([]byte, error) {
	if bytes.Count(python, []byte(marker)) != 1 {
		return nil, fmt.Errorf("assemble shim: sitecustomize.py has no single %q line", strings.TrimSpace(marker))
	}
	var b strings.Builder
	b.WriteString("NATIVE = (\n")
	for _, lib := range native {
		s := base64.StdEncoding.EncodeToString(lib)
		b.WriteString("    (\n")
		for len(s) > 0 {
			n := min(len(s), 76)
			fmt.Fprintf(&b, "        %q\n", s[:n])
			s = s[n:]
		}
		b.WriteString("    ),\n")
	}
	b.WriteString(")  # rayvast:native\n")
	return bytes.Replace(python, []byte(marker), []byte(b.String()), 1), nil
}

// Wire is content as the enroll answer carries it.
func Wire(content []byte) *wire.Shim {
	return &wire.Shim{Name: Name, ContentB64: base64.StdEncoding.EncodeToString(content)}
}
