package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

func window(requests, failures uint32) *pb.PassiveResult {
	return &pb.PassiveResult{Requests: requests, Failures: failures}
}

func passiveReport(windows map[string]*pb.PassiveResult) *pb.PassiveReport {
	rep := &pb.PassiveReport{}
	for addr, w := range windows {
		rep.Origins = append(rep.Origins, &pb.PassiveOrigin{Address: addr, Passive: w})
	}
	return rep
}

// drain returns the suspects queued on ch.
func drain(ch <-chan sdk.Suspect) []sdk.Suspect {
	var out []sdk.Suspect
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}

// TestTriggerReport: which of a node's passive reports make suspects, on
// a clock of the test's own.
func TestTriggerReport(t *testing.T) {
	rule := passiveRule{minRequests: 10, failureRatio: 0.3}
	const interval = 10 * time.Second
	targets := []sdk.Target{
		{Site: "www", Origin: "a1", Address: "http://192.0.2.1"},
		{Site: "www", Origin: "a2", Address: "http://192.0.2.2"},
		{Site: "api", Origin: "b1", Address: "http://192.0.2.3"},
		{Site: "eu", Origin: "c1", Address: "http://192.0.2.4"},
		{Site: "shared", Origin: "s", Address: "http://192.0.2.1"}, // a second site on a1's address
	}
	type step struct {
		advance time.Duration
		windows map[string]*pb.PassiveResult
		want    []string // "site/origin" of the suspects, in order
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a window that votes down makes its sites suspect", []step{
			{windows: map[string]*pb.PassiveResult{"http://192.0.2.3": window(20, 7)}, want: []string{"api/b1"}},
		}},
		{"an address shared by two sites suspects both", []step{
			{windows: map[string]*pb.PassiveResult{"http://192.0.2.1": window(20, 10)}, want: []string{"shared/s", "www/a1"}},
		}},
		{"a window that votes up, or is sparse, does not", []step{
			{windows: map[string]*pb.PassiveResult{"http://192.0.2.3": window(20, 6), "http://192.0.2.2": window(5, 5)}, want: nil},
		}},
		{"an address no ballot named does not", []step{
			{windows: map[string]*pb.PassiveResult{"http://198.51.100.1": window(20, 20)}, want: nil},
		}},
		{"a site the node is not eligible for does not", []step{
			{windows: map[string]*pb.PassiveResult{"http://192.0.2.4": window(20, 20)}, want: nil},
		}},
		{"once per interval per origin and per site", []step{
			{windows: map[string]*pb.PassiveResult{"http://192.0.2.3": window(20, 7)}, want: []string{"api/b1"}},
			{advance: time.Second, windows: map[string]*pb.PassiveResult{"http://192.0.2.3": window(20, 9)}, want: nil},
			{advance: interval, windows: map[string]*pb.PassiveResult{"http://192.0.2.3": window(20, 9)}, want: []string{"api/b1"}},
		}},
		{"another origin of a site just reported waits", []step{
			{windows: map[string]*pb.PassiveResult{"http://192.0.2.2": window(20, 7)}, want: []string{"www/a2"}},
			{advance: time.Second, windows: map[string]*pb.PassiveResult{"http://192.0.2.1": window(20, 8)}, want: []string{"shared/s"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
			tr := newTriggers(hclog.NewNullLogger(), func() time.Time { return now })
			tr.learn(targets)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := tr.watch(ctx)
			eligible := func(site string) bool { return site != "eu" }
			for i, s := range tc.steps {
				now = now.Add(s.advance)
				tr.report("edge-1", passiveReport(s.windows), rule, interval, eligible)
				var got []string
				for _, sus := range drain(ch) {
					got = append(got, sus.Site+"/"+sus.Origin)
					if sus.Detail == "" {
						t.Errorf("step %d: suspect %+v says nothing of why", i, sus)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(s.want) {
					t.Fatalf("step %d: suspects %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

// TestTriggerBoundedReport: one report is read up to maxReportOrigins
// origins, and a stream that does not read loses suspects instead of
// holding the gateway up.
func TestTriggerBoundedReport(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	tr := newTriggers(hclog.NewNullLogger(), func() time.Time { return now })
	var targets []sdk.Target
	rep := &pb.PassiveReport{}
	const n = maxReportOrigins + suspectQueue + 10
	for i := range n {
		addr := fmt.Sprintf("http://192.0.2.%d:%d", i%250, 8000+i)
		targets = append(targets, sdk.Target{Site: fmt.Sprintf("s%03d", i), Origin: "o", Address: addr})
		rep.Origins = append(rep.Origins, &pb.PassiveOrigin{Address: addr, Passive: window(20, 20)})
	}
	tr.learn(targets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := tr.watch(ctx)
	tr.report("edge-1", rep, passiveRule{minRequests: 10, failureRatio: 0.3}, time.Minute, func(string) bool { return true })
	if got := len(drain(ch)); got != maxReportOrigins {
		t.Fatalf("%d suspects from one report of %d failing origins, want the first %d", got, n, maxReportOrigins)
	}
	// A stream nobody reads: the gateway goes on, the overflow is lost.
	rep.Origins = rep.Origins[maxReportOrigins:]
	for len(rep.Origins) > 0 {
		tr.report("edge-1", &pb.PassiveReport{Origins: rep.Origins[:min(len(rep.Origins), maxReportOrigins)]}, passiveRule{minRequests: 10, failureRatio: 0.3},
			time.Minute, func(string) bool { return true })
		rep.Origins = rep.Origins[min(len(rep.Origins), maxReportOrigins):]
	}
	if got := len(drain(ch)); got != suspectQueue {
		t.Fatalf("%d suspects queued, want the queue's %d", got, suspectQueue)
	}
	if tr.lost != n-maxReportOrigins-suspectQueue {
		t.Fatalf("lost %d, want %d", tr.lost, n-maxReportOrigins-suspectQueue)
	}
}

func TestTriggerConfig(t *testing.T) {
	env := func(string) string { return "tok" }
	cfg := func(extra map[string]any) sdk.Config {
		v := map[string]any{"listen": "127.0.0.1:0", "token_env": "T"}
		for k, x := range extra {
			v[k] = x
		}
		return sdk.Config{Values: v}
	}
	for _, tc := range []struct {
		name     string
		extra    map[string]any
		trigger  bool
		interval time.Duration
		err      string // the attribute of the diagnostic, "" for none
	}{
		{"off without passive votes", nil, false, DefaultSuspectInterval, ""},
		{"on with passive votes", map[string]any{"passive_votes": true}, true, DefaultSuspectInterval, ""},
		{"turned off", map[string]any{"passive_votes": true, "passive_trigger": false}, false, DefaultSuspectInterval, ""},
		{"an interval", map[string]any{"passive_votes": true, "suspect_interval": time.Minute}, true, time.Minute, ""},
		{"on without passive votes", map[string]any{"passive_trigger": true}, false, 0, "passive_trigger"},
		{"an interval too short", map[string]any{"passive_votes": true, "suspect_interval": 500 * time.Millisecond}, false, 0, "suspect_interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := parseConfig(cfg(tc.extra), env)
			if tc.err != "" {
				var diags sdk.Diagnostics
				if !errors.As(err, &diags) || len(diags) != 1 || diags[0].AttributePath != tc.err {
					t.Fatalf("err %v, want one diagnostic on %s", err, tc.err)
				}
				return
			}
			if err != nil || st.trigger != tc.trigger || st.suspectInterval != tc.interval {
				t.Fatalf("trigger %v interval %v err %v, want %v %v", st.trigger, st.suspectInterval, err, tc.trigger, tc.interval)
			}
		})
	}
}

// TestTriggerLogsOncePerInterval: many reports make one log line per
// suspect_interval, not one each; a round writes what is left.
func TestTriggerLogsOncePerInterval(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	logs := &sdktest.LogBuffer{}
	tr := newTriggers(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs}), func() time.Time { return now })
	const interval = 10 * time.Second
	var targets []sdk.Target
	for i := range 30 {
		targets = append(targets, sdk.Target{Site: fmt.Sprintf("s%02d", i), Origin: "o", Address: fmt.Sprintf("http://192.0.2.%d", i)})
	}
	tr.learn(targets)
	rule := passiveRule{minRequests: 10, failureRatio: 0.3}
	all := func(string) bool { return true }
	lines := func() int { return strings.Count(logs.String(), "passive trigger:") }
	for i := range 20 {
		now = now.Add(100 * time.Millisecond)
		tr.report("edge-1", passiveReport(map[string]*pb.PassiveResult{targets[i].Address: window(20, 20)}), rule, interval, all)
	}
	if n := lines(); n != 1 {
		t.Fatalf("%d log lines for 20 reports within one interval, want 1:\n%s", n, logs)
	}
	tr.flush(interval)
	if n := lines(); n != 1 {
		t.Fatalf("a flush within the interval logged: %d lines", n)
	}
	now = now.Add(interval)
	tr.flush(interval)
	if n := lines(); n != 2 {
		t.Fatalf("%d log lines after the interval's flush, want 2:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "s19") {
		t.Fatalf("the second line does not name the sites reported since the first:\n%s", logs)
	}
}

// TestTriggerMixedVersions: what the gateway announces, and whose reports
// it reads. A raw node over gRPC speaks for a node of this release; the
// reports a gateway must ignore are handed to it directly, so that their
// absence of effect is checked without waiting.
func TestTriggerMixedVersions(t *testing.T) {
	t.Run("welcome", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			extra   map[string]any
			trigger bool
		}{
			{"passive votes: the trigger is on", map[string]any{"passive_votes": true, "passive_min_requests": 12.0, "passive_failure_ratio": 0.4}, true},
			{"passive_trigger = false", map[string]any{"passive_votes": true, "passive_trigger": false}, false},
			{"no passive votes", nil, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				gw := startGateway(t, tc.extra)
				n := attachRaw(t, gw.Addr().String(), "edge-1", nil, "probe_settings", "not_run", "passive", "passive_trigger")
				w := n.welcome
				if got := slices.Contains(w.GetFeatures(), featurePassiveTrigger); got != tc.trigger {
					t.Fatalf("welcome features %v: passive_trigger %v, want %v", w.GetFeatures(), got, tc.trigger)
				}
				if tc.trigger && (w.GetPassiveMinRequests() != 12 || w.GetPassiveFailureRatio() != 0.4) {
					t.Fatalf("welcome rule %d %v, want 12 0.4", w.GetPassiveMinRequests(), w.GetPassiveFailureRatio())
				}
				if !tc.trigger && (w.GetPassiveMinRequests() != 0 || w.GetPassiveFailureRatio() != 0) {
					t.Fatalf("a welcome without the trigger sends its rule: %v", w)
				}
			})
		}
	})
	failing := func(addr string) *pb.PassiveReport {
		return &pb.PassiveReport{Origins: []*pb.PassiveOrigin{{Address: addr, Passive: window(20, 20)}}}
	}
	targets := []sdk.Target{{Site: "www", Origin: "a1", Address: "http://192.0.2.1"}, {Site: "api", Origin: "b1", Address: "http://192.0.2.2"}}
	t.Run("a report over the wire", func(t *testing.T) {
		gw := startGateway(t, map[string]any{"passive_votes": true})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		suspects := gw.Suspects(ctx)
		n := attachRaw(t, gw.Addr().String(), "edge-1", nil, "passive", "passive_trigger")
		gw.trig.learn(targets)
		if err := n.stream.Send(&pb.NodeMessage{Msg: &pb.NodeMessage_PassiveReport{PassiveReport: failing("http://192.0.2.2")}}); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-suspects:
			if s.Site != "api" || s.Origin != "b1" {
				t.Fatalf("suspect %+v, want api/b1", s)
			}
		case <-time.After(time.Minute): // catches a hang only
			t.Fatal("no suspect from the node's report")
		}
	})
	for _, tc := range []struct {
		name  string
		extra map[string]any
		node  *conn
	}{
		{"a node that keeps no windows", map[string]any{"passive_votes": true}, &conn{id: "old"}},
		{"a gateway with passive_trigger = false", map[string]any{"passive_votes": true, "passive_trigger": false}, &conn{id: "edge-1", passive: true}},
		{"a gateway without passive votes", nil, &conn{id: "edge-1", passive: true}},
	} {
		t.Run("ignored: "+tc.name, func(t *testing.T) {
			gw := startGateway(t, tc.extra)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			suspects := gw.Suspects(ctx)
			gw.trig.learn(targets)
			gw.passiveReport(tc.node, failing("http://192.0.2.1"))
			if got := drain(suspects); len(got) != 0 {
				t.Fatalf("suspects %+v from a report the gateway must ignore", got)
			}
		})
	}
}
