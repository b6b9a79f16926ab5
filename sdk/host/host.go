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
// plugins: the magic cookie VIGIL_VOTE_SOURCE_PLUGIN (see sdk/PROTOCOL.md)
// and, for a host that sets no VersionedPlugins, protocol version
// [sdk.ProtocolVersion]. The cookie only tells a plugin binary that it was
// started by a host; it is not a secret.
var Handshake = glue.Handshake

// PluginName is the name under which the vote source is served and
// dispensed in go-plugin's plugin set.
const PluginName = glue.PluginName

// MaxMessageSize is the largest gRPC message either side accepts, in bytes.
// It is far above the default 4 MiB so that one ballot can carry tens of
// thousands of targets and their votes.
const MaxMessageSize = glue.MaxMessageSize

// ProtocolVersions returns the vote-source protocol versions a host built
// with this package speaks, oldest first: 1 and 2. [Plugins] offers them
// all in the handshake.
func ProtocolVersions() []int { return append([]int(nil), glue.HostProtocolVersions...) }

// Plugins returns the go-plugin plugin sets by protocol version, one for
// each of [ProtocolVersions]: go-plugin offers them all to the plugin,
// which picks the newest it serves. A host passes a nil impl and
// dispenses [PluginName] to get a [Client] that speaks the agreed version:
// its Info reports that version, and its Vote never sends a protocol-1
// plugin a field of protocol 2 (sdk/PROTOCOL.md). With a non-nil impl the
// sets also serve impl, as package sdktest does to run a plugin in-process.
func Plugins(impl sdk.VoteSource) map[int]plugin.PluginSet {
	sets := make(map[int]plugin.PluginSet, len(glue.HostProtocolVersions))
	for _, v := range glue.HostProtocolVersions {
		sets[v] = plugin.PluginSet{PluginName: &grpcPlugin{impl: impl, version: v}}
	}
	return sets
}

// grpcPlugin is the host side of go-plugin's glue for one protocol
// version.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl    sdk.VoteSource
	version int
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return errors.New("sdk/host: no VoteSource to serve")
	}
	return glue.RegisterServer(s, p.impl)
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &client{rpc: pb.NewVoteSourceClient(c), cc: c, version: p.version}, nil
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
