package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilcdn/vigil/sdk"
	pb "github.com/vigilcdn/vigil/sdk/proto/votesource/v1"
)

// client is the host side: a VoteSource that calls the plugin over gRPC.
type client struct {
	rpc pb.VoteSourceClient
	cc  grpc.ClientConnInterface
	// version is the protocol version the handshake agreed on.
	version int
}

var callOpts = []grpc.CallOption{grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)}

func (c *client) Info(ctx context.Context) (sdk.Info, error) {
	resp, err := c.rpc.Info(ctx, &pb.InfoRequest{}, callOpts...)
	if err != nil {
		return sdk.Info{}, err
	}
	info := sdk.Info{Name: resp.GetName(), Version: resp.GetVersion(), ProtocolVersion: c.version}
	if c.version >= 2 {
		// A protocol-1 plugin declares no capabilities: whatever it sent
		// in fields it cannot know is not a declaration.
		info.Capabilities, info.SDKVersion = resp.GetCapabilities(), resp.GetSdkVersion()
	}
	return info, nil
}

func (c *client) ConfigSchema(ctx context.Context) (sdk.Schema, error) {
	resp, err := c.rpc.ConfigSchema(ctx, &pb.ConfigSchemaRequest{}, callOpts...)
	if err != nil {
		return sdk.Schema{}, err
	}
	s := sdk.Schema{Attributes: make([]sdk.Attribute, len(resp.GetAttributes()))}
	for i, a := range resp.GetAttributes() {
		s.Attributes[i] = sdk.Attribute{Name: a.GetName(), Type: sdk.Type(a.GetType()), Required: a.GetRequired(), Description: a.GetDescription()}
	}
	return s, nil
}

// Configure returns Diagnostics when the plugin rejected the configuration,
// and any other error when the call itself failed.
func (c *client) Configure(ctx context.Context, cfg sdk.Config) error {
	req := &pb.ConfigureRequest{Values: make(map[string]*pb.ConfigValue, len(cfg.Values))}
	for name, v := range cfg.Values {
		var cv pb.ConfigValue
		switch x := v.(type) {
		case string:
			cv.Kind = &pb.ConfigValue_StringValue{StringValue: x}
		case float64:
			cv.Kind = &pb.ConfigValue_NumberValue{NumberValue: x}
		case int:
			cv.Kind = &pb.ConfigValue_NumberValue{NumberValue: float64(x)}
		case bool:
			cv.Kind = &pb.ConfigValue_BoolValue{BoolValue: x}
		case []string:
			cv.Kind = &pb.ConfigValue_StringList{StringList: &pb.StringList{Values: x}}
		case time.Duration:
			cv.Kind = &pb.ConfigValue_DurationNanos{DurationNanos: int64(x)}
		default:
			return fmt.Errorf("config attribute %q: unsupported Go type %T", name, v)
		}
		req.Values[name] = &cv
	}
	resp, err := c.rpc.Configure(ctx, req, callOpts...)
	if err != nil {
		return err
	}
	diags := make(sdk.Diagnostics, len(resp.GetDiagnostics()))
	for i, d := range resp.GetDiagnostics() {
		diags[i] = sdk.Diagnostic{AttributePath: d.GetAttributePath(), Summary: d.GetSummary(), Detail: d.GetDetail()}
	}
	return diags.Err()
}

// Vote passes vote values and reasons through unchecked: the host validates
// them (an unknown Value shows up as such and is dropped there). The
// request and the answer are written and read in the wire format directly
// (see wire.go). To a protocol-1 plugin it sends none of protocol 2's
// fields (the CA bundles, a target's TLS settings, headers, redirects and
// body limit): a host hands such a plugin only the targets that need none
// of them (sdk.RequiredCapabilities).
func (c *client) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	votes, _, err := c.VoteWithMetrics(ctx, ballot)
	return votes, err
}

// VoteWithMetrics is Vote, and the metrics the plugin sent with its
// answer, unchecked (sdk.CheckMetrics). A protocol-1 plugin sends none.
func (c *client) VoteWithMetrics(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, []sdk.Metric, error) {
	var resp voteResponse
	opts := append([]grpc.CallOption{grpc.ForceCodecV2(wireCodec{})}, callOpts...)
	if err := c.cc.Invoke(ctx, pb.VoteSource_Vote_FullMethodName, &voteRequest{ballot: &ballot, v1: c.version < 2}, &resp, opts...); err != nil {
		return nil, nil, err
	}
	return resp.votes, resp.metrics, nil
}

// MetricsVoter is a VoteSource whose Vote answers carry the plugin's own
// metrics too (sdk.MetricsReporter on the plugin's side): what the
// plugins that Plugins dispenses are. vigil reads the metrics with the
// votes.
type MetricsVoter interface {
	sdk.VoteSource
	VoteWithMetrics(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, []sdk.Metric, error)
}

var _ MetricsVoter = (*client)(nil)

// Status asks the plugin for its status; ErrNoStatus when it has none.
func (c *client) Status(ctx context.Context) (sdk.Status, error) {
	resp, err := c.rpc.Status(ctx, &pb.StatusRequest{}, callOpts...)
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return sdk.Status{}, sdk.ErrNoStatus
		}
		return sdk.Status{}, err
	}
	st := sdk.Status{Summary: resp.GetSummary(), Items: make([]sdk.StatusItem, len(resp.GetItems()))}
	for i, it := range resp.GetItems() {
		item := sdk.StatusItem{Name: it.GetName(), State: it.GetState(), Detail: it.GetDetail(), Labels: it.GetLabels()}
		if n := it.GetLastSeenUnixNanos(); n != 0 {
			item.LastSeen = time.Unix(0, n)
		}
		st.Items[i] = item
	}
	return st, nil
}

// WatchSuspects opens the plugin's suspect stream and calls report for
// each suspect, in order, until ctx ends (it then returns ctx's error), the
// stream breaks or the plugin ends it (io.EOF). It returns
// [sdk.ErrNoSuspects] when the plugin does not report suspects (it answered
// Unimplemented, as plugins older than SDK v0.2.0 do). report must not
// block: the stream is not read while it runs. Suspects come as the plugin
// sent them, unchecked: the host bounds them.
func (c *client) WatchSuspects(ctx context.Context, report func(sdk.Suspect)) error {
	stream, err := c.rpc.WatchSuspects(ctx, &pb.WatchSuspectsRequest{}, callOpts...)
	if err != nil {
		return suspectErr(ctx, err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return suspectErr(ctx, err)
		}
		report(sdk.Suspect{Site: m.GetSite(), Origin: m.GetOrigin(), Detail: m.GetDetail()})
	}
}

func suspectErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, io.EOF):
		return io.EOF
	case status.Code(err) == codes.Unimplemented:
		return sdk.ErrNoSuspects
	}
	return fmt.Errorf("suspect stream: %w", err)
}
