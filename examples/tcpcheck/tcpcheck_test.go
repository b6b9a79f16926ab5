package tcpcheck_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/examples/tcpcheck"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

func TestTCPCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	ballot := sdk.Ballot{Targets: []sdk.Target{
		{Site: "www", Origin: "open", Address: "http://" + ln.Addr().String(), Timeout: 5 * time.Second},
		{Site: "www", Origin: "closed", Address: "https://" + closedAddr, Timeout: 5 * time.Second},
		{Site: "www", Origin: "garbled", Address: "::not a url"},
	}}
	for _, tc := range []struct {
		name string
		src  func(t *testing.T) sdk.VoteSource
	}{
		{"in-process", func(t *testing.T) sdk.VoteSource { return sdktest.InProcess(t, tcpcheck.New(nil)) }},
		{"subprocess", func(t *testing.T) sdk.VoteSource {
			return sdktest.Launch(t, sdktest.Build(t, "./cmd/vigil-source-tcp"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(t)
			sdktest.Configure(t, src, sdk.Config{Values: map[string]any{"voter": "tcp-test"}})
			votes, err := src.Vote(context.Background(), ballot)
			if err != nil {
				t.Fatal(err)
			}
			sdktest.CheckVotes(t, ballot, votes)
			got := map[string]sdk.Vote{}
			for _, v := range votes {
				got[v.Origin] = v
			}
			// A narrow check: an open port is no Up (an origin answering
			// 503 accepts connections too).
			if v := got["open"]; v.Value != sdk.Abstain || v.Reason != sdk.ReasonUnsupported || v.Voter != "tcp-test" {
				t.Errorf("open: %+v, want an Abstain (unsupported)", v)
			}
			if v := got["closed"]; v.Value != sdk.Down || v.Reason != sdk.ReasonConnectFailed {
				t.Errorf("closed: %+v", v)
			}
			if v := got["garbled"]; v.Value != sdk.Abstain || v.Reason != sdk.ReasonUnsupported {
				t.Errorf("garbled: %+v, want an Abstain (unsupported) on an unparsable address", v)
			}
			for _, v := range votes {
				if v.Value == sdk.Up {
					t.Errorf("an Up vote from a narrow check: %+v", v)
				}
			}
		})
	}
}

func TestConfigureRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		path string
	}{
		{"port zero", map[string]any{"port": 0.0}, "port"},
		{"port fraction", map[string]any{"port": 80.5}, "port"},
		{"concurrency", map[string]any{"concurrency": 5000.0}, "concurrency"},
		{"voter", map[string]any{"voter": "has space"}, "voter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tcpcheck.New(nil).Configure(context.Background(), sdk.Config{Values: tc.cfg})
			var diags sdk.Diagnostics
			if !errors.As(err, &diags) || diags[0].AttributePath != tc.path {
				t.Errorf("Configure = %v, want a diagnostic on %q", err, tc.path)
			}
		})
	}
}
