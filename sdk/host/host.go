package host

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/internal/glue"
	pb "github.com/vigilcdn/vigil/sdk/proto/votesource/v1"
)

// Handshake is the go-plugin handshake shared by vigil and its vote-source
// plugins: protocol version [sdk.ProtocolVersion] and the magic cookie
// VIGIL_VOTE_SOURCE_PLUGIN (see sdk/PROTOCOL.md). The cookie only tells a
// plugin binary that it was started by a host; it is not a secret.
var Handshake = glue.Handshake

// PluginName is the name under which the vote source is served and
// dispensed in go-plugin's plugin set.
const PluginName = glue.PluginName

// MaxMessageSize is the largest gRPC message either side accepts, in bytes.
// It is far above the default 4 MiB so that one ballot can carry tens of
// thousands of targets and their votes.
const MaxMessageSize = glue.MaxMessageSize

// Plugins returns the go-plugin plugin sets by protocol version. A host
// passes a nil impl and dispenses [PluginName] to get an [sdk.VoteSource]
// that calls the plugin over gRPC. With a non-nil impl the set also serves
// impl, as package sdktest does to run a plugin in-process.
func Plugins(impl sdk.VoteSource) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		sdk.ProtocolVersion: {PluginName: &grpcPlugin{impl: impl}},
	}
}

// grpcPlugin is the host side of go-plugin's glue.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl sdk.VoteSource
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return errors.New("sdk/host: no VoteSource to serve")
	}
	return glue.RegisterServer(s, p.impl)
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &client{rpc: pb.NewVoteSourceClient(c), cc: c}, nil
}

// Client is what a host gets from dispensing [PluginName]: the plugin's
// VoteSource, its optional status, and its optional suspects.
type Client interface {
	sdk.VoteSource
	sdk.StatusReporter
	SuspectWatcher
}

// SuspectWatcher is the host's side of [sdk.SuspectReporter]: WatchSuspects
// opens the plugin's suspect stream and calls report for each suspect,
// unchecked and in order, until ctx ends (it returns ctx's error), the
// stream breaks, or the plugin ends it (io.EOF). It returns
// [sdk.ErrNoSuspects] at once when the plugin does not report suspects.
// report must not block.
type SuspectWatcher interface {
	WatchSuspects(ctx context.Context, report func(sdk.Suspect)) error
}

var _ Client = (*client)(nil)
