package host

import (
	"github.com/hashicorp/go-plugin"

	"github.com/vigilcdn/vigil/sdk/internal/glue"
)

// ReattachEnv names the environment variable that holds a reattach
// string: the JSON line a plugin prints when it runs in debug mode
// (sdk.WithDebug, VIGIL_PLUGIN_DEBUG=1 or -debug). A host that finds a
// source's plugin in it connects to that running process instead of
// starting the binary.
const ReattachEnv = glue.ReattachEnv

// ParseReattach reads a reattach string: a JSON object of plugins by name,
//
//	{"vigil-source-x":{"protocol":"grpc","protocol_version":2,"pid":123,
//	  "addr":{"network":"unix","string":"/tmp/plugin123"}}}
//
// (several plugins' objects may be merged into one). Each ReattachConfig
// is in go-plugin's test mode (Test: true): a host's Kill leaves the
// process running; its author stops it. The error names every entry at
// fault. go-plugin reads no VersionedPlugins when it reattaches: set the
// client's Plugins to Plugins(nil)[rc.ProtocolVersion] (nil when this
// host does not speak that version).
func ParseReattach(s string) (map[string]*plugin.ReattachConfig, error) {
	return glue.ParseReattach(s)
}
