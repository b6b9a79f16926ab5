package sdktest_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestOldHostRefusesNewPlugin: a host that speaks only protocol 1 (vigil
// before protocol 2) refuses a plugin built with this SDK at the
// handshake, as sdk/PROTOCOL.md promises, instead of dropping its
// abstentions round after round; the plugin's log says what to upgrade.
func TestOldHostRefusesNewPlugin(t *testing.T) {
	bin := sdktest.Build(t, "./testdata/echosource")
	logs := &sdktest.LogBuffer{}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  host.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{1: host.Plugins(nil)[1]},
		Cmd:              exec.Command(bin),
		SkipHostEnv:      true,
		AutoMTLS:         true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     30 * time.Second,
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
	})
	t.Cleanup(client.Kill)
	_, err := client.Client()
	if err == nil {
		t.Fatal("a protocol-1 host accepted a protocol-2 plugin")
	}
	if !strings.Contains(err.Error(), "Plugin version: 2") {
		t.Errorf("error = %v, want go-plugin's incompatible version", err)
	}
	logs.WaitFor(t, time.Minute, "serves vote-source protocol 2 (SDK "+sdk.Version+") and the host offers only 1")
}
