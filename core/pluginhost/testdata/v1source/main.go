// Command v1source is a vote-source plugin of protocol 1 as first
// published, frozen: the pluginhost tests run it against today's host to
// prove the compatibility promise of sdk/PROTOCOL.md.
//
// frozen_*.pb.go are the generated code of votesource.proto at commit
// d280dda (protocol 1 before CA bundles, TLS settings, headers, redirects,
// body limits, abstentions and plugin reasons were added), unchanged but
// for their package clause. It speaks go-plugin's handshake with protocol
// version 1, as the SDK of that time did, and imports nothing of vigil.
//
// For each target it makes a real GET of Address+Path (the system's roots,
// the target's Host header) and votes Up for a status below 500, Down
// otherwise (tls_failed when the certificate was refused), from voter
// "v1". Each vote's detail ends with "unknown=N": the bytes of fields
// unknown to protocol 1 that the ballot and its target carried (a host
// that keeps the promise sends none).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

type server struct {
	UnimplementedVoteSourceServer
}

func (server) Info(context.Context, *InfoRequest) (*InfoResponse, error) {
	return &InfoResponse{Name: "v1source", Version: "0.0.1", ProtocolVersion: 1}, nil
}

func (server) ConfigSchema(context.Context, *ConfigSchemaRequest) (*ConfigSchemaResponse, error) {
	return &ConfigSchemaResponse{}, nil
}

func (server) Configure(context.Context, *ConfigureRequest) (*ConfigureResponse, error) {
	return &ConfigureResponse{}, nil
}

func (server) Vote(ctx context.Context, req *VoteRequest) (*VoteResponse, error) {
	resp := &VoteResponse{}
	unknown := len(req.ProtoReflect().GetUnknown())
	for _, t := range req.GetTargets() {
		unknown := unknown + len(t.ProtoReflect().GetUnknown())
		v := check(ctx, t)
		v.Site, v.Origin, v.Voter = t.GetSite(), t.GetOrigin(), "v1"
		v.Detail = fmt.Sprintf("%s unknown=%d", v.Detail, unknown)
		resp.Votes = append(resp.Votes, v)
	}
	return resp, nil
}

func check(ctx context.Context, t *Target) *Vote {
	timeout := time.Duration(t.GetTimeoutNanos())
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.GetAddress()+t.GetPath(), nil)
	if err != nil {
		return &Vote{Value: Value_VALUE_DOWN, Reason: Reason_REASON_ERROR, Detail: err.Error()}
	}
	req.Host = t.GetHost()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: t.GetHost()}}}
	res, err := client.Do(req)
	if err != nil {
		var unknownAuthority x509.UnknownAuthorityError
		var invalid x509.CertificateInvalidError
		var hostname x509.HostnameError
		if errors.As(err, &unknownAuthority) || errors.As(err, &invalid) || errors.As(err, &hostname) {
			return &Vote{Value: Value_VALUE_DOWN, Reason: Reason_REASON_TLS_FAILED, Detail: "tls"}
		}
		return &Vote{Value: Value_VALUE_DOWN, Reason: Reason_REASON_CONNECT_FAILED, Detail: "connect"}
	}
	res.Body.Close()
	if res.StatusCode >= 500 {
		return &Vote{Value: Value_VALUE_DOWN, Reason: Reason_REASON_HTTP_5XX, Detail: res.Status}
	}
	return &Vote{Value: Value_VALUE_UP, Reason: Reason_REASON_OK, Detail: res.Status}
}

type votePlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

func (votePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	RegisterVoteSourceServer(s, server{})
	return nil
}

func (votePlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("plugin side only")
}

func main() {
	if os.Getenv("VIGIL_VOTE_SOURCE_PLUGIN") == "" {
		fmt.Fprintln(os.Stderr, "v1source is a vigil vote-source plugin of protocol 1")
		os.Exit(1)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  1,
			MagicCookieKey:   "VIGIL_VOTE_SOURCE_PLUGIN",
			MagicCookieValue: "9f1c3e0b7d2a4c58a6e1b0d4f7c2e935",
		},
		VersionedPlugins: map[int]plugin.PluginSet{1: {"votesource": votePlugin{}}},
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true}),
	})
}
