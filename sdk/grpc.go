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

	"github.com/vigilcdn/vigil/sdk/internal/glue"
	pb "github.com/vigilcdn/vigil/sdk/proto/votesource/v1"
)

func init() {
	glue.RegisterServer = func(s *grpc.Server, impl any) error {
		src, ok := impl.(VoteSource)
		if !ok || src == nil {
			return errors.New("sdk: no VoteSource to serve")
		}
		pb.RegisterVoteSourceServer(s, newServer(src))
		return nil
	}
}

// grpcPlugin is the plugin side of go-plugin's glue: it registers the
// VoteSource server in the plugin process. The host side is package
// sdk/host.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl VoteSource
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	return glue.RegisterServer(s, p.impl)
}

func (p *grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("sdk: the plugin side has no client; a host uses package sdk/host")
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
	return &pb.InfoResponse{Name: info.Name, Version: info.Version, ProtocolVersion: ProtocolVersion,
		Capabilities: info.Capabilities, SdkVersion: Version}, nil
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
		m.PluginReason = v.PluginReason
		if h := v.HTTP; h != nil {
			m.Http = &pb.HttpProbe{StatusCode: int32(h.StatusCode),
				ResolveNanos: int64(h.Resolve), ConnectNanos: int64(h.Connect), TlsNanos: int64(h.TLS),
				ProcessingNanos: int64(h.Processing), TransferNanos: int64(h.Transfer)}
			if !h.CertNotAfter.IsZero() {
				m.Http.CertNotAfterUnix = h.CertNotAfter.Unix()
			}
		}
		resp.Votes[i] = m
	}
	if r, ok := s.impl.(MetricsReporter); ok {
		resp.Metrics = metricsMessages(r.Metrics())
	}
	return resp, nil
}

// metricsMessages is ms on the wire. The host checks them (CheckMetrics).
func metricsMessages(ms []Metric) []*pb.Metric {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*pb.Metric, len(ms))
	for i, m := range ms {
		out[i] = &pb.Metric{Name: m.Name, Kind: pb.MetricKind(m.Kind), Value: m.Value, Help: m.Help, Labels: m.Labels}
	}
	return out
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

// WatchSuspects streams what the plugin's SuspectReporter reports until the
// host ends the stream or the plugin closes its channel. It does not take
// the call semaphore: SuspectReporter says Suspects must be safe to call
// at any time.
func (s *server) WatchSuspects(_ *pb.WatchSuspectsRequest, stream grpc.ServerStreamingServer[pb.Suspect]) error {
	r, ok := s.impl.(SuspectReporter)
	if !ok {
		return status.Error(codes.Unimplemented, "this plugin reports no suspects")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel() // the plugin stops sending once the stream is over
	ch := r.Suspects(ctx)
	if ch == nil {
		return status.Error(codes.Unimplemented, "this plugin reports no suspects (Suspects returned no channel)")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case sus, ok := <-ch:
			if !ok {
				return nil
			}
			if err := stream.Send(&pb.Suspect{Site: sus.Site, Origin: sus.Origin, Detail: sus.Detail}); err != nil {
				return err
			}
		}
	}
}
