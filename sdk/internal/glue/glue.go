// Package glue holds what the plugin side (package sdk) and the host side
// (package sdk/host) of the vote-source protocol share: the go-plugin
// handshake, the plugin's name in go-plugin's plugin set, the message size
// limit, and the hook through which package sdk registers its gRPC server.
// It is internal: neither plugin authors nor hosts use it directly.
package glue

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the vote-source protocol version the SDK serves
// (sdk.ProtocolVersion).
const ProtocolVersion = 2

// HostProtocolVersions are the protocol versions a host offers in the
// handshake, oldest first: it adapts to a plugin of any of them.
var HostProtocolVersions = []int{1, 2}

// SDKVersion is the SDK's own version (sdk.Version).
const SDKVersion = "0.3.0"

// The go-plugin magic cookie. It only tells a plugin binary that vigil
// started it; it is not a secret.
const (
	MagicCookieKey   = "VIGIL_VOTE_SOURCE_PLUGIN"
	MagicCookieValue = "9f1c3e0b7d2a4c58a6e1b0d4f7c2e935"
)

// Handshake is the go-plugin handshake of the vote-source protocol.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   MagicCookieKey,
	MagicCookieValue: MagicCookieValue,
}

// PluginName is the name under which the vote source is served and
// dispensed in go-plugin's plugin set.
const PluginName = "votesource"

// MaxMessageSize is the largest gRPC message either side accepts, in bytes:
// far above gRPC's default 4 MiB, so that one ballot can carry tens of
// thousands of targets and their votes.
const MaxMessageSize = 256 << 20

// RegisterServer registers impl (an sdk.VoteSource) as the VoteSource gRPC
// service of s. Package sdk sets it when it is initialized; package sdk/host
// imports sdk, so it is set before any host code runs.
var RegisterServer func(s *grpc.Server, impl any) error
