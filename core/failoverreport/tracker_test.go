package failoverreport_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/failoverreport"
	"github.com/vigilcdn/vigil/sdk/publication"
)

var t0 = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func sw() failoverreport.Switch {
	return failoverreport.Switch{Site: "www", FromLevel: 1, ToLevel: 2, Seq: 7, Round: 12, RoundStarted: at(20000),
		Origin: "a1", FirstFailure: at(0), Decided: at(20150)}
}

func val(t *testing.T, p *float64) float64 {
	t.Helper()
	if p == nil {
		t.Fatal("a duration is missing")
	}
	return *p
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b time.Time
		want *float64
	}{
		{"whole", at(0), at(1500), ptr(1.5)},
		{"cut to the millisecond", t0.Add(999 * time.Microsecond), t0.Add(2*time.Millisecond + 10*time.Microsecond), ptr(0.002)},
		{"negative (a node's clock behind)", at(500), at(200), ptr(-0.3)},
		{"unknown start", time.Time{}, at(1), nil},
		{"unknown end", at(1), time.Time{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := failoverreport.Seconds(tc.a, tc.b)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("got %v, want nothing", *got)
			case tc.want != nil && (got == nil || *got != *tc.want):
				t.Fatalf("got %v, want %v", got, *tc.want)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }

// TestReportArithmetic follows one failover through the Tracker: each
// duration is the difference of the times the report writes, the nodes'
// rows carry their own figures, and a node that never reports is shown as
// not reported once the wait ends.
func TestReportArithmetic(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := failoverreport.New(failoverreport.Options{Registerer: reg, Wait: time.Minute})
	// Three nodes are known from earlier publications.
	for _, n := range []string{"edge-1", "edge-2", "edge-old"} {
		tr.Applied(publication.Applied{Node: n, Version: 3, At: at(-60000)})
	}
	tr.Decided(sw())
	if got := tr.Reports("www", 0); len(got) != 1 || got[0].Complete || got[0].Committed != nil {
		t.Fatalf("right after the decision: %+v", got)
	}
	tr.Committed(at(20160))
	// edge-1's acknowledgement comes before the engine says it published.
	last := at(20170)
	tr.Applied(publication.Applied{Node: "edge-1", Version: 4, At: at(20180), Proxying: true,
		Sites: []publication.AppliedSite{{Site: "www", FromLevel: 1, ToLevel: 2, LastRequest: &last, Requests: 40, Failures: 3}}})
	tr.Published(4, at(20165))
	// edge-2 applied version 5 first (it missed 4): its diff has the site.
	tr.Applied(publication.Applied{Node: "edge-2", Version: 5, At: at(20400), Error: "haproxy: runtime API refused",
		Sites: []publication.AppliedSite{{Site: "www", FromLevel: 1, ToLevel: 2}}})
	// A later version without the site says nothing of this failover.
	tr.Applied(publication.Applied{Node: "edge-old", Version: 6, At: at(21000)})
	if len(tr.Take()) != 0 {
		t.Fatal("complete before the wait ended and with a node missing")
	}
	tr.Tick(at(20165 + 59999))
	if len(tr.Take()) != 0 {
		t.Fatal("complete a millisecond before the wait ended")
	}
	tr.Tick(at(20165 + 60000))
	done := tr.Take()
	if len(done) != 1 {
		t.Fatalf("%d reports complete, want 1", len(done))
	}
	rep := done[0]
	if !rep.Complete || rep.Publication != 4 || rep.Seq != 7 || rep.Origin != "a1" {
		t.Fatalf("report: %+v", rep)
	}
	for _, c := range []struct {
		name string
		got  *float64
		want float64
	}{
		{"detect", rep.DetectSeconds, 20.15},
		{"commit", rep.CommitSeconds, 0.01},
		{"publish", rep.PublishSeconds, 0.015},
		{"edge (the last ok apply)", rep.EdgeSeconds, 0.015},
		{"total", rep.TotalSeconds, 20.18},
	} {
		if g := val(t, c.got); g != c.want {
			t.Errorf("%s = %v, want %v", c.name, g, c.want)
		}
	}
	if len(rep.Nodes) != 3 {
		t.Fatalf("rows: %+v", rep.Nodes)
	}
	n1, n2, old := rep.Nodes[0], rep.Nodes[1], rep.Nodes[2]
	if n1.Node != "edge-1" || !n1.Reported || n1.Result != "ok" || val(t, n1.EdgeSeconds) != 0.015 ||
		val(t, n1.LastRequestSeconds) != 20.17 || n1.VisitorRequests != 40 || n1.VisitorErrors != 3 || !n1.Proxying {
		t.Errorf("edge-1: %+v", n1)
	}
	if n2.Node != "edge-2" || n2.Version != 5 || n2.Result != "haproxy: runtime API refused" || val(t, n2.EdgeSeconds) != 0.235 || n2.LastRequest != nil {
		t.Errorf("edge-2: %+v", n2)
	}
	if old.Node != "edge-old" || old.Reported || old.Applied != nil {
		t.Errorf("edge-old: %+v", old)
	}
	// Times and durations agree as written.
	if d := rep.Published.Sub(rep.Decided.Time).Seconds(); d != val(t, rep.PublishSeconds) {
		t.Errorf("published-decided = %v, publish_seconds = %v", d, *rep.PublishSeconds)
	}
	if got := testutil.CollectAndCount(reg, "vigil_failover_detect_seconds", "vigil_failover_publish_seconds", "vigil_failover_edge_seconds"); got != 3 {
		t.Errorf("%d histograms, want 3", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP vigil_failover_nodes_known Nodes that acknowledged a publication version to this agent (POST /v1/publication/applied); a failover report expects those heard from in the last day.
# TYPE vigil_failover_nodes_known gauge
vigil_failover_nodes_known 3
`), "vigil_failover_nodes_known"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(sampleCount(t, reg, "vigil_failover_edge_seconds")); got != 1 {
		t.Errorf("edge observations = %v, want 1 (edge-2's apply failed)", got)
	}
	// The report stays readable, newest first, as the API serves it.
	if got := tr.Reports("www", 5); len(got) != 1 || !got[0].Complete {
		t.Fatalf("reports: %+v", got)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"decided":"2026-12-02T07:00:20.150Z"`) {
		t.Errorf("times not in RFC 3339 with milliseconds: %s", b)
	}
	var back api.FailoverReport
	if err := json.Unmarshal(b, &back); err != nil || !back.Decided.Equal(rep.Decided.Time) || len(back.Nodes) != 3 {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

// sampleCount is a histogram's sample count as a gauge, for testutil.
func sampleCount(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "count"})
	for _, mf := range mfs {
		if mf.GetName() == name {
			g.Set(float64(mf.GetMetric()[0].GetHistogram().GetSampleCount()))
		}
	}
	return g
}

// TestCompleteWhenEveryNodeReported: the wait ends early when every node
// known at the publication reported, and a failover with no known node
// is complete at once.
func TestCompleteWhenEveryNodeReported(t *testing.T) {
	t.Run("every node", func(t *testing.T) {
		tr := failoverreport.New(failoverreport.Options{})
		tr.Applied(publication.Applied{Node: "n", Version: 1, At: at(0)})
		tr.Decided(sw())
		tr.Committed(at(20151))
		tr.Published(2, at(20152))
		if len(tr.Take()) != 0 {
			t.Fatal("complete before n reported")
		}
		tr.Applied(publication.Applied{Node: "n", Version: 2, At: at(20160)})
		done := tr.Take()
		if len(done) != 1 || len(done[0].Nodes) != 1 || !done[0].Nodes[0].Reported {
			t.Fatalf("%+v", done)
		}
	})
	t.Run("no node", func(t *testing.T) {
		tr := failoverreport.New(failoverreport.Options{})
		tr.Decided(sw())
		tr.Committed(at(20151))
		tr.Published(2, at(20152))
		done := tr.Take()
		if len(done) != 1 || len(done[0].Nodes) != 0 || done[0].EdgeSeconds != nil {
			t.Fatalf("%+v", done)
		}
	})
	t.Run("never published", func(t *testing.T) {
		tr := failoverreport.New(failoverreport.Options{Wait: time.Second})
		tr.Decided(sw())
		tr.Tick(at(20150 + 1999))
		if len(tr.Take()) != 0 {
			t.Fatal("ended early")
		}
		tr.Tick(at(20150 + 2000))
		done := tr.Take()
		if len(done) != 1 || done[0].Published != nil || done[0].PublishSeconds != nil {
			t.Fatalf("%+v", done)
		}
	})
}

// TestReportsNewestFirst: open reports first, then the complete ones
// newest first, bounded by limit and by Keep.
func TestReportsNewestFirst(t *testing.T) {
	tr := failoverreport.New(failoverreport.Options{Keep: 2})
	for i := range 3 {
		s := sw()
		s.Seq = uint64(10 + i)
		tr.Decided(s)
		tr.Committed(at(30000))
		tr.Published(uint64(5+i), at(30001))
	}
	tr.Restore("www", []api.FailoverReport{{Site: "www", Seq: 1}})
	s := sw()
	s.Seq = 20
	tr.Decided(s)
	got := tr.Reports("www", 0)
	var seqs []uint64
	for _, r := range got {
		seqs = append(seqs, r.Seq)
	}
	if want := []uint64{20, 12, 11}; !equal(seqs, want) {
		t.Fatalf("seqs %v, want %v", seqs, want)
	}
	if got[0].Complete || !got[1].Complete {
		t.Fatalf("complete flags: %v %v", got[0].Complete, got[1].Complete)
	}
	if n := len(tr.Reports("www", 1)); n != 1 {
		t.Fatalf("limit 1 gave %d", n)
	}
	if n := len(tr.Reports("other", 0)); n != 0 {
		t.Fatalf("another site has %d", n)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNodesForgotten: a node not heard from for NodeTTL is no longer
// expected, and Nodes bounds how many are known.
func TestNodesForgotten(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
	}{
		{"not heard from for NodeTTL", 3},
		{"pushed out by a newer one", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := failoverreport.New(failoverreport.Options{NodeTTL: time.Hour, Nodes: tc.nodes})
			tr.Applied(publication.Applied{Node: "gone", Version: 1, At: at(20152).Add(-time.Hour)})
			tr.Applied(publication.Applied{Node: "old", Version: 1, At: at(0)})
			tr.Applied(publication.Applied{Node: "new", Version: 1, At: at(10)})
			tr.Decided(sw())
			tr.Committed(at(20151))
			tr.Published(2, at(20152))
			got := tr.Reports("www", 0)
			if len(got) != 1 || len(got[0].Nodes) != 2 || got[0].Nodes[0].Node != "new" || got[0].Nodes[1].Node != "old" {
				t.Fatalf("rows %+v, want new and old, not gone", got)
			}
		})
	}
}
