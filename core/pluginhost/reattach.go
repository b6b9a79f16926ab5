package pluginhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-plugin"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

// reattachFor returns this source's entry of VIGIL_REATTACH_PLUGINS, and
// its key, or nil when the variable is unset or names neither the source
// nor its plugin binary. An entry keyed by the source's name wins over one
// keyed by the binary's base name (what a plugin in debug mode prints).
func (s *Source) reattachFor() (*plugin.ReattachConfig, string, error) {
	v := os.Getenv(host.ReattachEnv)
	if v == "" {
		return nil, "", nil
	}
	rcs, err := host.ParseReattach(v)
	if err != nil {
		return nil, "", err
	}
	for _, key := range []string{s.spec.Name, filepath.Base(s.spec.Plugin)} {
		if rc := rcs[key]; rc != nil && key != "" && key != "." {
			return rc, key, nil
		}
	}
	return nil, "", nil
}

// attach connects to a plugin process started by hand in debug mode
// (sdk.WithDebug) instead of starting the binary. vigil neither restarts
// nor stops that process: a restart attaches again, and stopping the
// source only closes the connection.
func (s *Source) attach(rc *plugin.ReattachConfig, key string) (*process, error) {
	set := host.Plugins(nil)[rc.ProtocolVersion]
	if set == nil {
		return nil, fmt.Errorf("the plugin in debug mode named %q in %s (pid %d) serves vote-source protocol %d, and this vigil speaks %v: rebuild it with an SDK of a protocol this vigil speaks",
			key, host.ReattachEnv, rc.Pid, rc.ProtocolVersion, host.ProtocolVersions())
	}
	if s.checksum != nil {
		s.log.Warn("the source's checksum is not checked: vigil attaches to a process started by hand, not to a binary", "reattach", key)
	}
	exitLog := s.newExitLogger()
	exitLog.onPurpose.Store(true) // its exit is its author's doing
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  host.Handshake,
		Plugins:          set, // go-plugin reads no VersionedPlugins on reattach
		Reattach:         rc,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     s.startTimeout(),
		Logger:           exitLog,
	})
	fail := func(err error) (*process, error) {
		return nil, fmt.Errorf("attach to the plugin in debug mode named %q in %s (pid %d, %s %s): %w; is it still running? start it again and export the line it prints",
			key, host.ReattachEnv, rc.Pid, rc.Addr.Network(), rc.Addr.String(), err)
	}
	rpc, err := client.Client()
	if err != nil {
		return fail(err)
	}
	raw, err := rpc.Dispense(host.PluginName)
	if err != nil {
		closeConn(rpc)
		return fail(err)
	}
	src, ok := raw.(sdk.VoteSource)
	if !ok {
		closeConn(rpc)
		return fail(fmt.Errorf("it does not serve a vote source"))
	}
	s.log.Warn("attached to a plugin started by hand ("+host.ReattachEnv+"): vigil will neither restart nor stop it; the connection is not encrypted",
		"reattach", key, "pid", rc.Pid, "addr", rc.Addr.String())
	watching, unwatch := context.WithCancel(context.Background())
	return &process{client: client, rpc: rpc, pid: rc.Pid, attached: true, src: src, log: exitLog, watching: watching, unwatch: unwatch}, nil
}

// closeConn closes the connection to an attached plugin without asking
// it to shut down (go-plugin's GRPCClient.Close would).
func closeConn(rpc plugin.ClientProtocol) {
	if g, ok := rpc.(*plugin.GRPCClient); ok {
		_ = g.Conn.Close()
	}
}
