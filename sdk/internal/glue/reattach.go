package glue

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/hashicorp/go-plugin"
)

// ReattachEnv is the environment variable a host reads the reattach
// string from; DebugEnv the one that starts a plugin in debug mode.
const (
	ReattachEnv = "VIGIL_REATTACH_PLUGINS"
	DebugEnv    = "VIGIL_PLUGIN_DEBUG"
)

// reattachEntry is one plugin of a reattach string, keyed by name:
//
//	{"vigil-source-x":{"protocol":"grpc","protocol_version":2,"pid":123,
//	  "addr":{"network":"unix","string":"/tmp/plugin123"}}}
type reattachEntry struct {
	Protocol        string       `json:"protocol"`
	ProtocolVersion int          `json:"protocol_version"`
	Pid             int          `json:"pid"`
	Addr            reattachAddr `json:"addr"`
}

type reattachAddr struct {
	Network string `json:"network"`
	String  string `json:"string"`
}

// FormatReattach is the reattach string of one plugin served in debug
// mode under name.
func FormatReattach(name string, rc *plugin.ReattachConfig) (string, error) {
	if rc == nil || rc.Addr == nil {
		return "", errors.New("no address to reattach to")
	}
	b, err := json.Marshal(map[string]reattachEntry{name: {
		Protocol:        string(rc.Protocol),
		ProtocolVersion: rc.ProtocolVersion,
		Pid:             rc.Pid,
		Addr:            reattachAddr{Network: rc.Addr.Network(), String: rc.Addr.String()},
	}})
	if err != nil {
		return "", fmt.Errorf("reattach string: %w", err)
	}
	return string(b), nil
}

// ParseReattach reads a reattach string: a JSON object of plugins by name,
// as FormatReattach writes them (several may be merged into one object).
// Each ReattachConfig is in go-plugin's test mode (Test: true): the host
// never kills the process, which ends when its author stops it.
func ParseReattach(s string) (map[string]*plugin.ReattachConfig, error) {
	var raw map[string]reattachEntry
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("%s is not the JSON a plugin prints in debug mode, {\"NAME\":{\"protocol\":\"grpc\",\"protocol_version\":2,\"pid\":PID,\"addr\":{\"network\":\"unix\",\"string\":\"PATH\"}}}: %w; copy the whole line the plugin printed", ReattachEnv, err)
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(map[string]*plugin.ReattachConfig, len(raw))
	var problems []string
	for _, n := range names {
		e := raw[n]
		var addr net.Addr
		var err error
		switch e.Addr.Network {
		case "unix":
			addr, err = net.ResolveUnixAddr("unix", e.Addr.String)
		case "tcp":
			addr, err = net.ResolveTCPAddr("tcp", e.Addr.String)
		default:
			err = fmt.Errorf("network %q is neither unix nor tcp", e.Addr.Network)
		}
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("plugin %q: address: %v", n, err))
			continue
		case e.Addr.String == "":
			problems = append(problems, fmt.Sprintf("plugin %q: no addr.string", n))
			continue
		case e.Protocol != string(plugin.ProtocolGRPC):
			problems = append(problems, fmt.Sprintf("plugin %q: protocol %q, want \"grpc\"", n, e.Protocol))
			continue
		case e.Pid <= 0:
			problems = append(problems, fmt.Sprintf("plugin %q: no pid", n))
			continue
		case e.ProtocolVersion <= 0:
			problems = append(problems, fmt.Sprintf("plugin %q: no protocol_version", n))
			continue
		}
		out[n] = &plugin.ReattachConfig{Protocol: plugin.ProtocolGRPC, ProtocolVersion: e.ProtocolVersion, Addr: addr, Pid: e.Pid, Test: true}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %s; copy the whole line the plugin printed in debug mode", ReattachEnv, strings.Join(problems, "; "))
	}
	return out, nil
}
