package host

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/vigilcdn/vigil/sdk"
	pb "github.com/vigilcdn/vigil/sdk/proto/votesource/v1"
)

// The host's side of Vote writes the request and reads the answer in the
// protocol's wire format directly from and into the SDK's types, instead
// of building the generated messages first: a ballot of 200,000 targets
// would otherwise hold some 80 MB of messages beside the ballot itself.
// The bytes are exactly what proto.Marshal of the generated messages gives
// (tested), so a plugin sees no difference.

// Field numbers of votesource.proto.
const (
	fReqRound, fReqTargets, fReqCAs = 1, 2, 3

	fTSite, fTOrigin, fTAddress, fTHost, fTPath, fTTimeout, fTUserAgent     = 1, 2, 3, 4, 5, 6, 7
	fTStatuses, fTBody, fTMaxLatency, fTTLS, fTHeaders, fTFollow, fTMaxBody = 8, 9, 10, 11, 12, 13, 14

	fTLSServerName, fTLSCA, fTLSInsecure = 1, 2, 3

	fRespVotes, fRespMetrics = 1, 2

	fVSite, fVOrigin, fVVoter, fVValue, fVReason, fVDetail, fVLatency, fVPluginReason, fVHTTP = 1, 2, 3, 4, 5, 6, 7, 8, 9
)

// voteRequest is a Vote request to be written from a ballot; v1 leaves out
// every field of protocol 2.
type voteRequest struct {
	ballot *sdk.Ballot
	v1     bool
}

// voteResponse is a Vote answer to be read into votes and, when the
// plugin sent any, its metrics.
type voteResponse struct {
	votes   []sdk.Vote
	metrics []sdk.Metric
}

// wireCodec marshals voteRequest and unmarshals voteResponse; it leaves
// every other message to protobuf. Its name is "proto": on the wire it is
// the protobuf codec.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *voteRequest:
		return mem.BufferSlice{mem.SliceBuffer(appendVoteRequest(nil, m.ballot, m.v1))}, nil
	case proto.Message:
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return nil, fmt.Errorf("sdk: cannot marshal a %T", v)
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b := data.Materialize()
	switch m := v.(type) {
	case *voteResponse:
		votes, metrics, err := parseVoteResponse(b)
		m.votes, m.metrics = votes, metrics
		return err
	case proto.Message:
		return proto.Unmarshal(b, m)
	}
	return fmt.Errorf("sdk: cannot unmarshal into a %T", v)
}

var _ encoding.CodecV2 = wireCodec{}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// sortedKeys gives map entries in a fixed order (proto.Marshal's order is
// not fixed either; any order is valid).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendVoteRequest(b []byte, ballot *sdk.Ballot, v1 bool) []byte {
	b = appendVarint(b, fReqRound, ballot.Round)
	var t []byte
	for i := range ballot.Targets {
		t = appendTarget(t[:0], &ballot.Targets[i], v1)
		b = protowire.AppendTag(b, fReqTargets, protowire.BytesType)
		b = protowire.AppendBytes(b, t)
	}
	if v1 {
		return b
	}
	for _, k := range sortedKeys(ballot.CAs) {
		var e []byte
		e = appendString(e, 1, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendBytes(e, ballot.CAs[k])
		b = protowire.AppendTag(b, fReqCAs, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b
}

func appendTarget(b []byte, t *sdk.Target, v1 bool) []byte {
	b = appendString(b, fTSite, t.Site)
	b = appendString(b, fTOrigin, t.Origin)
	b = appendString(b, fTAddress, t.Address)
	b = appendString(b, fTHost, t.Host)
	b = appendString(b, fTPath, t.Path)
	b = appendVarint(b, fTTimeout, uint64(t.Timeout))
	b = appendString(b, fTUserAgent, t.UserAgent)
	if len(t.Expect.Statuses) > 0 {
		var packed []byte
		for _, s := range t.Expect.Statuses {
			packed = protowire.AppendVarint(packed, uint64(int64(int32(s))))
		}
		b = protowire.AppendTag(b, fTStatuses, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	b = appendString(b, fTBody, t.Expect.BodyContains)
	b = appendVarint(b, fTMaxLatency, uint64(t.Expect.MaxLatency))
	if v1 {
		return b // fields 11 to 14 are protocol 2
	}
	if t.TLS != (sdk.TLSSettings{}) {
		var tl []byte
		tl = appendString(tl, fTLSServerName, t.TLS.ServerName)
		tl = appendString(tl, fTLSCA, t.TLS.CA)
		if t.TLS.InsecureSkipVerify {
			tl = appendVarint(tl, fTLSInsecure, 1)
		}
		b = protowire.AppendTag(b, fTTLS, protowire.BytesType)
		b = protowire.AppendBytes(b, tl)
	}
	for _, k := range sortedKeys(t.Headers) {
		var e []byte
		e = appendString(e, 1, k)
		e = appendString(e, 2, t.Headers[k])
		b = protowire.AppendTag(b, fTHeaders, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	if t.FollowRedirects {
		b = appendVarint(b, fTFollow, 1)
	}
	b = appendVarint(b, fTMaxBody, uint64(t.MaxBody))
	return b
}

var errWire = errors.New("sdk/host: malformed Vote answer")

// parseVoteResponse reads a VoteResponse into votes and metrics. Voter
// ids and details repeat across an answer ("direct", "HTTP 200 OK"): each
// is kept once. The metrics, a few, are read with the generated message.
func parseVoteResponse(b []byte) ([]sdk.Vote, []sdk.Metric, error) {
	votes := make([]sdk.Vote, 0, len(b)/48)
	var metrics []sdk.Metric
	strs := map[string]string{}
	share := func(raw []byte) string {
		if s, ok := strs[string(raw)]; ok { // no allocation for the lookup
			return s
		}
		s := string(raw)
		if len(strs) < 4096 {
			strs[s] = s
		}
		return s
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, errWire
		}
		b = b[n:]
		if (num != fRespVotes && num != fRespMetrics) || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, nil, errWire
			}
			b = b[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, nil, errWire
		}
		b = b[n:]
		if num == fRespMetrics {
			var m pb.Metric
			if err := proto.Unmarshal(msg, &m); err != nil {
				return nil, nil, errWire
			}
			metrics = append(metrics, sdk.Metric{Name: m.GetName(), Kind: sdk.MetricKind(m.GetKind()), Value: m.GetValue(), Help: m.GetHelp(), Labels: m.GetLabels()})
			continue
		}
		v, err := parseVote(msg, share)
		if err != nil {
			return nil, nil, err
		}
		votes = append(votes, v)
	}
	return votes, metrics, nil
}

func parseVote(b []byte, share func([]byte) string) (sdk.Vote, error) {
	var v sdk.Vote
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return v, errWire
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && (num >= fVSite && num <= fVDetail || num == fVPluginReason):
			raw, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return v, errWire
			}
			b = b[n:]
			switch num {
			case fVSite:
				v.Site = string(raw)
			case fVOrigin:
				v.Origin = string(raw)
			case fVVoter:
				v.Voter = share(raw)
			case fVDetail:
				v.Detail = share(raw)
			case fVPluginReason:
				v.PluginReason = share(raw)
			default: // a known field of another type: skip it as the proto would
			}
		case typ == protowire.BytesType && num == fVHTTP:
			raw, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return v, errWire
			}
			b = b[n:]
			h, err := parseHTTPProbe(raw)
			if err != nil {
				return v, err
			}
			v.HTTP = h
		case typ == protowire.VarintType && (num == fVValue || num == fVReason || num == fVLatency):
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return v, errWire
			}
			b = b[n:]
			switch num {
			case fVValue:
				v.Value = sdk.Value(int32(x))
			case fVReason:
				v.Reason = sdk.Reason(int32(x))
			case fVLatency:
				v.Latency = time.Duration(int64(x))
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return v, errWire
			}
			b = b[n:]
		}
	}
	return v, nil
}

// parseHTTPProbe reads a HttpProbe message (Vote.http): every field a
// varint; unknown ones are skipped.
func parseHTTPProbe(b []byte) (*sdk.HTTPProbe, error) {
	h := &sdk.HTTPProbe{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errWire
		}
		b = b[n:]
		if typ != protowire.VarintType || num < 1 || num > 7 {
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, errWire
			}
			b = b[n:]
			continue
		}
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, errWire
		}
		b = b[n:]
		d := time.Duration(int64(x))
		switch num {
		case 1:
			h.StatusCode = int(int32(x))
		case 2:
			h.Resolve = d
		case 3:
			h.Connect = d
		case 4:
			h.TLS = d
		case 5:
			h.Processing = d
		case 6:
			h.Transfer = d
		case 7:
			if int64(x) != 0 {
				h.CertNotAfter = time.Unix(int64(x), 0)
			}
		}
	}
	return h, nil
}
