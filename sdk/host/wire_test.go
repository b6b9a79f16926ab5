package host

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/vigilcdn/vigil/sdk"
	pb "github.com/vigilcdn/vigil/sdk/proto/votesource/v1"
)

// generated is the request the generated messages make of a ballot: the
// reference the wire writer must match.
func generated(b *sdk.Ballot) *pb.VoteRequest {
	req := &pb.VoteRequest{Round: b.Round, Cas: b.CAs}
	for _, t := range b.Targets {
		m := &pb.Target{Site: t.Site, Origin: t.Origin, Address: t.Address, Host: t.Host, Path: t.Path, UserAgent: t.UserAgent,
			TimeoutNanos: int64(t.Timeout), ExpectBodyContains: t.Expect.BodyContains, ExpectMaxLatencyNanos: int64(t.Expect.MaxLatency),
			Headers: t.Headers, FollowRedirects: t.FollowRedirects, MaxBody: t.MaxBody}
		for _, s := range t.Expect.Statuses {
			m.ExpectStatuses = append(m.ExpectStatuses, int32(s))
		}
		if t.TLS != (sdk.TLSSettings{}) {
			m.Tls = &pb.TLSSettings{ServerName: t.TLS.ServerName, Ca: t.TLS.CA, InsecureSkipVerify: t.TLS.InsecureSkipVerify}
		}
		req.Targets = append(req.Targets, m)
	}
	return req
}

func TestWireRequestIsTheProtocols(t *testing.T) {
	ballots := []sdk.Ballot{
		{},
		{Round: 7, Targets: []sdk.Target{{Site: "www", Origin: "a1"}}},
		{Round: 1 << 40, CAs: map[string][]byte{"sha256:x": []byte("PEM"), "b": nil}, Targets: []sdk.Target{
			{Site: "www", Origin: "a1", Address: "https://203.0.113.1:8443", Host: "www.example.com", Path: "/h?x=1", Timeout: 1500 * time.Millisecond,
				UserAgent: "ua", Expect: sdk.Expectations{Statuses: []int{200, 204, 599}, BodyContains: "ok", MaxLatency: time.Second},
				TLS: sdk.TLSSettings{ServerName: "o.internal", CA: "sha256:x", InsecureSkipVerify: true}, Headers: map[string]string{"X-A": "1", "Authorization": "Bearer t"},
				FollowRedirects: true, MaxBody: 1 << 20},
			{Site: "api", Origin: "b", TLS: sdk.TLSSettings{InsecureSkipVerify: true}},
			{Site: "ünïcode", Origin: "o", Expect: sdk.Expectations{Statuses: []int{0}}},
		}},
	}
	for i, b := range ballots {
		var got pb.VoteRequest
		if err := proto.Unmarshal(appendVoteRequest(nil, &b, false), &got); err != nil {
			t.Fatalf("ballot %d: the wire writer's bytes do not parse: %v", i, err)
		}
		if want := generated(&b); !proto.Equal(&got, want) {
			t.Fatalf("ballot %d:\n got  %v\n want %v", i, &got, want)
		}
	}
}

func TestWireResponseIsTheProtocols(t *testing.T) {
	resp := &pb.VoteResponse{Votes: []*pb.Vote{
		{Site: "www", Origin: "a1", Voter: "direct", Value: pb.Value_VALUE_UP, Reason: pb.Reason_REASON_OK, Detail: "HTTP 200 OK", LatencyNanos: 1234},
		{Site: "www", Origin: "a2", Voter: "direct", Value: pb.Value_VALUE_ABSTAIN, Reason: pb.Reason_REASON_OUT_OF_TIME},
		{Site: "www", Origin: "a3", Voter: "tls", Value: pb.Value_VALUE_DOWN, Reason: pb.Reason_REASON_TLS_FAILED, PluginReason: "tlscheck/cert_expiring"},
		{Site: "www", Origin: "a4", Voter: "direct", Value: pb.Value_VALUE_UP, Reason: pb.Reason_REASON_OK, Http: &pb.HttpProbe{StatusCode: 204,
			ResolveNanos: 1, ConnectNanos: 2, TlsNanos: 3, ProcessingNanos: 4, TransferNanos: 5, CertNotAfterUnix: 1800000000}},
		{Site: "www", Origin: "a5", Voter: "direct", Value: pb.Value_VALUE_DOWN, Reason: pb.Reason_REASON_CONNECT_FAILED, Http: &pb.HttpProbe{}},
		{Site: "x", Origin: "y", Voter: "n", Value: 99, Reason: 77, LatencyNanos: -5},
		{},
	}, Metrics: []*pb.Metric{
		{Name: "dnspup_quota_requests_total", Kind: pb.MetricKind_METRIC_KIND_COUNTER, Value: 9, Help: "POSTs", Labels: map[string]string{"result": "spent"}},
		{Name: "tlscheck_certs", Kind: pb.MetricKind_METRIC_KIND_GAUGE, Value: -1.5},
	}}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	votes, metrics, err := parseVoteResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics := []sdk.Metric{
		{Name: "dnspup_quota_requests_total", Kind: sdk.MetricCounter, Value: 9, Help: "POSTs", Labels: map[string]string{"result": "spent"}},
		{Name: "tlscheck_certs", Kind: sdk.MetricGauge, Value: -1.5},
	}
	if !reflect.DeepEqual(metrics, wantMetrics) {
		t.Errorf("metrics %+v, want %+v", metrics, wantMetrics)
	}
	if len(votes) != len(resp.Votes) {
		t.Fatalf("%d votes, want %d", len(votes), len(resp.Votes))
	}
	for i, m := range resp.Votes {
		if want := voteOf(m); !reflect.DeepEqual(votes[i], want) {
			t.Fatalf("vote %d: %+v, want %+v", i, votes[i], want)
		}
	}
	for _, bad := range [][]byte{{0x0a}, {0x0a, 0x05, 0x0a}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if _, _, err := parseVoteResponse(bad); err == nil {
			t.Errorf("malformed answer %x read without an error", bad)
		}
	}
}

// voteOf is the vote protobuf reads, in the SDK's terms.
func voteOf(m *pb.Vote) sdk.Vote {
	v := sdk.Vote{Site: m.Site, Origin: m.Origin, Voter: m.Voter, Value: sdk.Value(m.Value), Reason: sdk.Reason(m.Reason), Detail: m.Detail, Latency: time.Duration(m.LatencyNanos), PluginReason: m.PluginReason}
	if h := m.Http; h != nil {
		v.HTTP = &sdk.HTTPProbe{StatusCode: int(h.StatusCode), Resolve: time.Duration(h.ResolveNanos), Connect: time.Duration(h.ConnectNanos),
			TLS: time.Duration(h.TlsNanos), Processing: time.Duration(h.ProcessingNanos), Transfer: time.Duration(h.TransferNanos)}
		if h.CertNotAfterUnix != 0 {
			v.HTTP.CertNotAfter = time.Unix(h.CertNotAfterUnix, 0)
		}
	}
	return v
}

func FuzzParseVoteResponse(f *testing.F) {
	b, _ := proto.Marshal(&pb.VoteResponse{Votes: []*pb.Vote{{Site: "s", Origin: "o", Voter: "v", Value: 1, Reason: 1, Detail: "d", LatencyNanos: 9}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		votes, metrics, err := parseVoteResponse(b)
		var ref pb.VoteResponse
		refErr := proto.Unmarshal(b, &ref)
		if refErr != nil {
			return // the reference refuses it; ours may differ on what to refuse
		}
		if err != nil {
			t.Fatalf("protobuf reads it but parseVoteResponse does not: %v", err)
		}
		if len(votes) != len(ref.Votes) || len(metrics) != len(ref.Metrics) {
			t.Fatalf("%d votes and %d metrics, protobuf reads %d and %d", len(votes), len(metrics), len(ref.Votes), len(ref.Metrics))
		}
		for i, m := range ref.Votes {
			if want := voteOf(m); !reflect.DeepEqual(votes[i], want) {
				t.Fatalf("vote %d: %+v, protobuf reads %+v", i, votes[i], want)
			}
		}
	})
}

// TestWireRequestToProtocol1 checks that a protocol-1 plugin is sent none
// of protocol 2's fields, whatever the ballot holds.
func TestWireRequestToProtocol1(t *testing.T) {
	b := sdk.Ballot{Round: 3, CAs: map[string][]byte{"sha256:x": []byte("PEM")}, Targets: []sdk.Target{{
		Site: "www", Origin: "a1", Address: "https://127.0.0.1:8443", Host: "www.example.com", Path: "/h", Timeout: time.Second,
		UserAgent: "ua", Expect: sdk.Expectations{Statuses: []int{200}, BodyContains: "ok", MaxLatency: time.Second},
		TLS: sdk.TLSSettings{ServerName: "o", CA: "sha256:x", InsecureSkipVerify: true}, Headers: map[string]string{"X-A": "1"},
		FollowRedirects: true, MaxBody: 10,
	}}}
	var got pb.VoteRequest
	if err := proto.Unmarshal(appendVoteRequest(nil, &b, true), &got); err != nil {
		t.Fatal(err)
	}
	want := generated(&sdk.Ballot{Round: b.Round, Targets: []sdk.Target{{
		Site: "www", Origin: "a1", Address: "https://127.0.0.1:8443", Host: "www.example.com", Path: "/h", Timeout: time.Second,
		UserAgent: "ua", Expect: b.Targets[0].Expect,
	}}})
	if !proto.Equal(&got, want) {
		t.Fatalf("protocol 1 request:\n got  %v\n want %v", &got, want)
	}
}
