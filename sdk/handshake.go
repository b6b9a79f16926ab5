package sdk

import (
	"github.com/hashicorp/go-plugin"
)

// Handshake is the go-plugin handshake shared by vigil and its vote-source
// plugins. The magic cookie only tells a plugin binary that it was started by
// vigil (run by hand, it prints a hint and exits); it is not a secret.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "VIGIL_VOTE_SOURCE_PLUGIN",
	MagicCookieValue: "9f1c3e0b7d2a4c58a6e1b0d4f7c2e935",
}

// PluginName is the name under which the vote source is served and
// dispensed in go-plugin's plugin set.
const PluginName = "votesource"

// MaxMessageSize is the largest gRPC message either side accepts, in bytes.
// It is far above the default 4 MiB so that one ballot can carry tens of
// thousands of targets and their votes.
const MaxMessageSize = 256 << 20

// Plugins returns the go-plugin plugin sets by protocol version. A plugin
// process serves impl through them; a host passes a nil impl and dispenses
// [PluginName] to get a [VoteSource] that calls the plugin over gRPC.
// Plugin authors do not need it: [Serve] and package sdktest use it.
func Plugins(impl VoteSource) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &grpcPlugin{impl: impl}},
	}
}
