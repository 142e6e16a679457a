package autoscaler

import _ "embed"

// PluginModule is the module name Ray's cluster config names
// (provider.module: rayvast_autoscaler.RayvastNodeProvider).
const PluginModule = "rayvast_autoscaler"

// Plugin is rayvast_autoscaler.py: `head up` writes it into the state dir
// and puts that dir on the Ray head's PYTHONPATH, so the head stays one file.
//
//go:embed rayvast_autoscaler.py
var Plugin []byte
