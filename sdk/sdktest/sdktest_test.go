package sdktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
	"github.com/vigilcdn/vigil/sdk/sdktest/internal/echo"
)

func TestEchoSource(t *testing.T) {
	bin := sdktest.Build(t, "./testdata/echosource")
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) sdk.VoteSource
	}{
		{"in-process", func(t *testing.T) sdk.VoteSource { return sdktest.InProcess(t, echo.New()) }},
		{"subprocess", func(t *testing.T) sdk.VoteSource { return sdktest.Launch(t, bin) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.start(t)
			ctx := context.Background()
			info, err := src.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != "echosource" || info.ProtocolVersion != sdk.ProtocolVersion || info.SDKVersion != sdk.Version {
				t.Errorf("info = %+v", info)
			}
			sdktest.Configure(t, src, sdk.Config{Values: map[string]any{
				"voter": "edge-1", "tags": []string{"a"}, "count": 3.0, "wait": time.Second, "on": true,
			}})
			err = sdktest.ConfigureErr(t, src, sdk.Config{Values: map[string]any{"voter": "no spaces", "tags": []string{"x", "bad"}}})
			var diags sdk.Diagnostics
			if !errors.As(err, &diags) || len(diags) != 2 || diags[0].AttributePath != "voter" || diags[1].AttributePath != "tags[1]" {
				t.Fatalf("configure error = %#v, want diagnostics on voter and tags[1]", err)
			}
			sdktest.Configure(t, src, sdk.Config{Values: map[string]any{"voter": "edge-1"}})
			ballot := sdk.Ballot{Round: 7, Targets: []sdk.Target{{
				Site: "www", Origin: "a1", Address: "https://127.0.0.1:8443", Host: "www.example.com", Path: "/h",
				Timeout: 5 * time.Second, UserAgent: "ua", Expect: sdk.Expectations{Statuses: []int{200, 204}, BodyContains: "ok", MaxLatency: time.Second},
			}}}
			votes, err := src.Vote(ctx, ballot)
			if err != nil {
				t.Fatal(err)
			}
			sdktest.CheckVotes(t, ballot, votes)
			want := sdk.Vote{Site: "www", Origin: "a1", Voter: "edge-1", Value: sdk.Up, Reason: sdk.ReasonOK,
				Detail: `https://127.0.0.1:8443 www.example.com /h 5s 7 ua [200 204] "ok" 1s`, Latency: 2500 * time.Millisecond}
			if len(votes) != 1 || votes[0] != want {
				t.Errorf("votes = %+v\nwant %+v", votes, want)
			}
		})
	}
}

// TestCheckVotes: sdktest.CheckVotes fails a test exactly when
// sdk.CheckVotes finds a problem.
func TestCheckVotes(t *testing.T) {
	ballot := sdk.Ballot{Targets: []sdk.Target{{Site: "s", Origin: "o"}}}
	for _, tc := range []struct {
		name string
		vote sdk.Vote
		ok   bool
	}{
		{"good", sdk.Vote{Site: "s", Origin: "o", Voter: "v", Value: sdk.Down}, true},
		{"unknown origin", sdk.Vote{Site: "s", Origin: "x", Voter: "v", Value: sdk.Up}, false},
		{"bad value", sdk.Vote{Site: "s", Origin: "o", Voter: "v", Value: 9}, false},
		{"empty voter", sdk.Vote{Site: "s", Origin: "o", Value: sdk.Up}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := sdk.CheckVotes(ballot, []sdk.Vote{tc.vote})
			if (len(problems) == 0) != tc.ok {
				t.Errorf("sdk.CheckVotes = %v, want ok=%v", problems, tc.ok)
			}
			rec := &recorder{TB: t}
			sdktest.CheckVotes(rec, ballot, []sdk.Vote{tc.vote})
			if rec.failed == tc.ok {
				t.Errorf("sdktest.CheckVotes failed=%v, want ok=%v", rec.failed, tc.ok)
			}
		})
	}
}

// TestCheckInfo: CheckInfo passes a plugin whose Info is sound, in-process
// and over the wire, and fails one that declares an unknown capability.
func TestCheckInfo(t *testing.T) {
	info := sdktest.CheckInfo(t, sdktest.InProcess(t, echo.New()))
	if info.SDKVersion != sdk.Version || info.ProtocolVersion != sdk.ProtocolVersion {
		t.Errorf("info = %+v", info)
	}
	for _, tc := range []struct {
		caps []string
		fail bool
	}{
		{sdk.ProbeCapabilities(), false},
		{nil, false},
		{[]string{"tls.ca-bundle"}, true},
		{[]string{sdk.CapabilityAbstain, sdk.CapabilityAbstain}, true},
	} {
		ft := &fakeT{TB: t}
		sdktest.CheckInfo(ft, infoOnly{sdk.Info{Name: "x", Version: "1", Capabilities: tc.caps}})
		if ft.failed != tc.fail {
			t.Errorf("capabilities %v: failed %v, want %v", tc.caps, ft.failed, tc.fail)
		}
	}
}

type infoOnly struct{ info sdk.Info }

func (p infoOnly) Info(context.Context) (sdk.Info, error)         { return p.info, nil }
func (infoOnly) ConfigSchema(context.Context) (sdk.Schema, error) { return sdk.Schema{}, nil }
func (infoOnly) Configure(context.Context, sdk.Config) error      { return nil }

// fakeT records a failure instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
func (f *fakeT) Helper()               {}

// recorder is a testing.TB that records a failure instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Error(args ...any)     { r.failed = true }
func (r *recorder) Errorf(string, ...any) { r.failed = true }
