package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/vigilcdn/vigil/sdk/internal/proto/votesource/v1"
)

// grpcPlugin is the go-plugin glue: it registers the server side in the
// plugin process and builds the client side in the host.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl VoteSource
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return errors.New("sdk: no VoteSource to serve")
	}
	pb.RegisterVoteSourceServer(s, newServer(p.impl))
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &client{rpc: pb.NewVoteSourceClient(c), cc: c}, nil
}

// server adapts a VoteSource to the generated gRPC service. Calls into the
// implementation are serialized: a plugin need not be safe for concurrent
// use, and a call that outlived its deadline holds back the next one.
type server struct {
	pb.UnimplementedVoteSourceServer
	impl VoteSource
	sem  chan struct{}
}

func newServer(impl VoteSource) *server {
	return &server{impl: impl, sem: make(chan struct{}, 1)}
}

func (s *server) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("previous call still running: %w", ctx.Err())
	}
}

func (s *server) unlock() { <-s.sem }

func (s *server) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.InfoResponse, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	info, err := s.impl.Info(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.InfoResponse{Name: info.Name, Version: info.Version, ProtocolVersion: ProtocolVersion}, nil
}

func (s *server) ConfigSchema(ctx context.Context, _ *pb.ConfigSchemaRequest) (*pb.ConfigSchemaResponse, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	schema, err := s.impl.ConfigSchema(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pb.ConfigSchemaResponse{Attributes: make([]*pb.Attribute, len(schema.Attributes))}
	for i, a := range schema.Attributes {
		resp.Attributes[i] = &pb.Attribute{Name: a.Name, Type: pb.AttributeType(a.Type), Required: a.Required, Description: a.Description}
	}
	return resp, nil
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	cfg := Config{Values: make(map[string]any, len(req.GetValues()))}
	for name, v := range req.GetValues() {
		switch k := v.GetKind().(type) {
		case *pb.ConfigValue_StringValue:
			cfg.Values[name] = k.StringValue
		case *pb.ConfigValue_NumberValue:
			cfg.Values[name] = k.NumberValue
		case *pb.ConfigValue_BoolValue:
			cfg.Values[name] = k.BoolValue
		case *pb.ConfigValue_StringList:
			cfg.Values[name] = append([]string{}, k.StringList.GetValues()...)
		case *pb.ConfigValue_DurationNanos:
			cfg.Values[name] = time.Duration(k.DurationNanos)
		}
	}
	err := s.impl.Configure(ctx, cfg)
	if err == nil {
		return &pb.ConfigureResponse{}, nil
	}
	var diags Diagnostics
	var diag Diagnostic
	switch {
	case errors.As(err, &diags):
	case errors.As(err, &diag):
		diags = Diagnostics{diag}
	default:
		diags = Diagnostics{{Summary: "Invalid configuration", Detail: err.Error()}}
	}
	resp := &pb.ConfigureResponse{Diagnostics: make([]*pb.Diagnostic, len(diags))}
	for i, d := range diags {
		resp.Diagnostics[i] = &pb.Diagnostic{AttributePath: d.AttributePath, Summary: d.Summary, Detail: d.Detail}
	}
	return resp, nil
}

func (s *server) Vote(ctx context.Context, req *pb.VoteRequest) (*pb.VoteResponse, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	ballot := Ballot{Round: req.GetRound(), Targets: make([]Target, len(req.GetTargets()))}
	for i, t := range req.GetTargets() {
		var statuses []int
		if len(t.GetExpectStatuses()) > 0 {
			statuses = make([]int, len(t.GetExpectStatuses()))
			for j, st := range t.GetExpectStatuses() {
				statuses[j] = int(st)
			}
		}
		ballot.Targets[i] = Target{
			Site:      t.GetSite(),
			Origin:    t.GetOrigin(),
			Address:   t.GetAddress(),
			Host:      t.GetHost(),
			Path:      t.GetPath(),
			Timeout:   time.Duration(t.GetTimeoutNanos()),
			UserAgent: t.GetUserAgent(),
			Expect: Expectations{
				Statuses:     statuses,
				BodyContains: t.GetExpectBodyContains(),
				MaxLatency:   time.Duration(t.GetExpectMaxLatencyNanos()),
			},
			Headers:         t.GetHeaders(),
			FollowRedirects: t.GetFollowRedirects(),
			MaxBody:         t.GetMaxBody(),
		}
		if tl := t.GetTls(); tl != nil {
			ballot.Targets[i].TLS = TLSSettings{ServerName: tl.GetServerName(), CA: tl.GetCa(), InsecureSkipVerify: tl.GetInsecureSkipVerify()}
		}
	}
	if len(req.GetCas()) > 0 {
		ballot.CAs = req.GetCas()
	}
	votes, err := s.impl.Vote(ctx, ballot)
	if err != nil {
		return nil, err
	}
	msgs := make([]pb.Vote, len(votes))
	resp := &pb.VoteResponse{Votes: make([]*pb.Vote, len(votes))}
	for i, v := range votes {
		m := &msgs[i]
		m.Site, m.Origin, m.Voter, m.Detail = v.Site, v.Origin, v.Voter, v.Detail
		m.Value = pb.Value(v.Value)
		m.Reason = pb.Reason(v.Reason)
		m.LatencyNanos = int64(v.Latency)
		resp.Votes[i] = m
	}
	return resp, nil
}

// client is the host side: a VoteSource that calls the plugin over gRPC.
type client struct {
	rpc pb.VoteSourceClient
	cc  grpc.ClientConnInterface
}

var callOpts = []grpc.CallOption{grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)}

func (c *client) Info(ctx context.Context) (Info, error) {
	resp, err := c.rpc.Info(ctx, &pb.InfoRequest{}, callOpts...)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: resp.GetName(), Version: resp.GetVersion(), ProtocolVersion: int(resp.GetProtocolVersion())}, nil
}

func (c *client) ConfigSchema(ctx context.Context) (Schema, error) {
	resp, err := c.rpc.ConfigSchema(ctx, &pb.ConfigSchemaRequest{}, callOpts...)
	if err != nil {
		return Schema{}, err
	}
	s := Schema{Attributes: make([]Attribute, len(resp.GetAttributes()))}
	for i, a := range resp.GetAttributes() {
		s.Attributes[i] = Attribute{Name: a.GetName(), Type: Type(a.GetType()), Required: a.GetRequired(), Description: a.GetDescription()}
	}
	return s, nil
}

// Configure returns Diagnostics when the plugin rejected the configuration,
// and any other error when the call itself failed.
func (c *client) Configure(ctx context.Context, cfg Config) error {
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
	diags := make(Diagnostics, len(resp.GetDiagnostics()))
	for i, d := range resp.GetDiagnostics() {
		diags[i] = Diagnostic{AttributePath: d.GetAttributePath(), Summary: d.GetSummary(), Detail: d.GetDetail()}
	}
	return diags.Err()
}

// Vote passes vote values and reasons through unchecked: the host validates
// them (an unknown Value shows up as such and is dropped there). The
// request and the answer are written and read in the wire format directly
// (see wire.go).
func (c *client) Vote(ctx context.Context, ballot Ballot) ([]Vote, error) {
	var resp voteResponse
	opts := append([]grpc.CallOption{grpc.ForceCodecV2(wireCodec{})}, callOpts...)
	if err := c.cc.Invoke(ctx, pb.VoteSource_Vote_FullMethodName, &voteRequest{ballot: &ballot}, &resp, opts...); err != nil {
		return nil, err
	}
	return resp.votes, nil
}

// Status answers without taking the call semaphore: StatusReporter says it
// must be safe to call at any time.
func (s *server) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	r, ok := s.impl.(StatusReporter)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this plugin reports no status")
	}
	st, err := r.Status(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pb.StatusResponse{Summary: st.Summary, Items: make([]*pb.StatusItem, len(st.Items))}
	for i, it := range st.Items {
		item := &pb.StatusItem{Name: it.Name, State: it.State, Detail: it.Detail, Labels: it.Labels}
		if !it.LastSeen.IsZero() {
			item.LastSeenUnixNanos = it.LastSeen.UnixNano()
		}
		resp.Items[i] = item
	}
	return resp, nil
}

// Status asks the plugin for its status; ErrNoStatus when it has none.
func (c *client) Status(ctx context.Context) (Status, error) {
	resp, err := c.rpc.Status(ctx, &pb.StatusRequest{}, callOpts...)
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return Status{}, ErrNoStatus
		}
		return Status{}, err
	}
	st := Status{Summary: resp.GetSummary(), Items: make([]StatusItem, len(resp.GetItems()))}
	for i, it := range resp.GetItems() {
		item := StatusItem{Name: it.GetName(), State: it.GetState(), Detail: it.GetDetail(), Labels: it.GetLabels()}
		if n := it.GetLastSeenUnixNanos(); n != 0 {
			item.LastSeen = time.Unix(0, n)
		}
		st.Items[i] = item
	}
	return st, nil
}
