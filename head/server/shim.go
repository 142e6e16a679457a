package server

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rayvast/rayvast/head/shim"
	"github.com/rayvast/rayvast/internal/wire"
)

// loadShim resolves --shim: "" the built-in shim, "none" no shim (the
// bundle's shim is null), else the named file, sent under its own name.
func loadShim(arg string, log *slog.Logger) (*wire.Shim, error) {
	switch arg {
	case "none":
		log.Info("no shim: Ray gets none (--shim none)")
		return nil, nil
	case "":
		content, libs := shim.Default()
		if len(libs) == 0 {
			log.Warn("built-in shim without its native library (head not built by build.sh): Python layer only; Ray's C/C++ connects to the node IP then rely on hairpin NAT")
		}
		return shim.Wire(content), nil
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("read shim: %w", err)
	}
	if name := filepath.Base(arg); name != shim.Name {
		log.Warn("shim file is not named "+shim.Name+": Python will not load it by itself", "name", name)
	}
	return &wire.Shim{Name: filepath.Base(arg), ContentB64: base64.StdEncoding.EncodeToString(b)}, nil
}
