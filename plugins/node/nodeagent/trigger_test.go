package nodeagent

import (
	"fmt"
	"slices"
	"testing"
	"time"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
)

// TestTrigger: which origins the passive trigger reports, look after look,
// on a clock of its own.
func TestTrigger(t *testing.T) {
	type step struct {
		advance time.Duration
		windows map[string]*pb.PassiveResult // changes to the windows before the look
		batch   []string                     // job addresses of a batch received before the look
		want    []string                     // origins reported, sorted
	}
	w := func(requests, failures, slow uint32) *pb.PassiveResult {
		return &pb.PassiveResult{Requests: requests, Failures: failures, Slow: slow}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"failures already in the window when first asked are not news", []step{
			{windows: map[string]*pb.PassiveResult{"a": w(20, 5, 0)}, batch: []string{"a"}, want: nil},
			{advance: 2 * time.Second, want: nil},
		}},
		{"a window that gains failures is reported at once", []step{
			{windows: map[string]*pb.PassiveResult{"a": w(20, 0, 0)}, batch: []string{"a", "b"}, want: nil},
			{windows: map[string]*pb.PassiveResult{"a": w(20, 1, 0)}, want: []string{"a"}},
		}},
		{"slow answers are failures too", []step{
			{windows: map[string]*pb.PassiveResult{"a": w(20, 0, 0)}, batch: []string{"a"}},
			{windows: map[string]*pb.PassiveResult{"a": w(20, 0, 2)}, want: []string{"a"}},
		}},
		{"at most once a second per origin, the held-back gain goes later", []step{
			{windows: map[string]*pb.PassiveResult{"a": w(20, 0, 0), "b": w(20, 0, 0)}, batch: []string{"a", "b"}},
			{windows: map[string]*pb.PassiveResult{"a": w(20, 1, 0)}, want: []string{"a"}},
			{advance: 300 * time.Millisecond, windows: map[string]*pb.PassiveResult{"a": w(20, 2, 0), "b": w(20, 1, 0)}, want: []string{"b"}},
			{advance: 300 * time.Millisecond, want: nil},
			{advance: 500 * time.Millisecond, want: []string{"a"}},
			{advance: 2 * time.Second, want: nil},
		}},
		{"fewer failures are no news, more again are", []step{
			{windows: map[string]*pb.PassiveResult{"a": w(20, 4, 0)}, batch: []string{"a"}},
			{advance: time.Second, windows: map[string]*pb.PassiveResult{"a": w(20, 2, 0)}, want: nil},
			{advance: time.Second, windows: map[string]*pb.PassiveResult{"a": w(20, 3, 0)}, want: []string{"a"}},
		}},
		{"origins no batch named are not watched", []step{
			{windows: map[string]*pb.PassiveResult{"a": w(20, 0, 0), "z": w(20, 0, 0)}, batch: []string{"a"}},
			{windows: map[string]*pb.PassiveResult{"z": w(20, 9, 0)}, want: nil},
		}},
		{"an origin no batch named for triggerForget is forgotten", []step{
			{windows: map[string]*pb.PassiveResult{"a": w(20, 0, 0)}, batch: []string{"a"}},
			{advance: triggerForget + time.Second, windows: map[string]*pb.PassiveResult{"a": w(20, 5, 0)}, want: nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
			windows := map[string]*pb.PassiveResult{}
			trig := newTrigger(func(a string) *pb.PassiveResult { return windows[a] }, func() time.Time { return now })
			for i, s := range tc.steps {
				now = now.Add(s.advance)
				for a, r := range s.windows {
					windows[a] = r
				}
				if len(s.batch) > 0 {
					b := &pb.Batch{}
					for _, a := range s.batch {
						b.Jobs = append(b.Jobs, &pb.ProbeJob{Address: a})
					}
					trig.track(b)
				}
				var got []string
				if rep := trig.poll(); rep != nil {
					for _, o := range rep.GetOrigins() {
						got = append(got, o.GetAddress())
						if o.GetPassive() != windows[o.GetAddress()] {
							t.Fatalf("step %d: %s reported with another window than its current one", i, o.GetAddress())
						}
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, s.want) {
					t.Fatalf("step %d: reported %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

// TestTriggerBounded: one look reports at most triggerBatch origins; the
// rest go with the next looks, and the watched origins are capped.
func TestTriggerBounded(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	windows := map[string]*pb.PassiveResult{}
	trig := newTrigger(func(a string) *pb.PassiveResult { return windows[a] }, func() time.Time { return now })
	b := &pb.Batch{}
	for i := range triggerMaxOrigins + 10 {
		a := fmt.Sprintf("http://192.0.2.%d:%d", i%250, 1000+i)
		b.Jobs = append(b.Jobs, &pb.ProbeJob{Address: a})
	}
	trig.track(b)
	if n := len(trig.origins); n != triggerMaxOrigins {
		t.Fatalf("%d origins watched, want the cap %d", n, triggerMaxOrigins)
	}
	const failing = 3*triggerBatch + 5
	for _, j := range b.Jobs[:failing] {
		windows[j.GetAddress()] = &pb.PassiveResult{Requests: 20, Failures: 10}
	}
	seen := map[string]bool{}
	for look := 0; len(seen) < failing; look++ {
		if look > 10 {
			t.Fatalf("after %d looks only %d of %d failing origins reported", look, len(seen), failing)
		}
		rep := trig.poll()
		if n := len(rep.GetOrigins()); n > triggerBatch {
			t.Fatalf("one report of %d origins, want at most %d", n, triggerBatch)
		}
		for _, o := range rep.GetOrigins() {
			if seen[o.GetAddress()] {
				t.Fatalf("%s reported twice within a second", o.GetAddress())
			}
			seen[o.GetAddress()] = true
		}
	}
}

// TestTriggerTrips: with the gateway's rule from its welcome, a window is
// reported only once it would vote down.
func TestTriggerTrips(t *testing.T) {
	rule := &trigger{minRequests: 10, failureRatio: 0.3}
	none := &trigger{}
	for _, tc := range []struct {
		name       string
		w          *pb.PassiveResult
		rule, none bool
	}{
		{"no window", nil, false, false},
		{"healthy", &pb.PassiveResult{Requests: 20}, false, false},
		{"a failure", &pb.PassiveResult{Requests: 20, Failures: 1}, false, true},
		{"at the ratio", &pb.PassiveResult{Requests: 20, Failures: 6}, false, true},
		{"past the ratio", &pb.PassiveResult{Requests: 20, Failures: 7}, true, true},
		{"slow answers count", &pb.PassiveResult{Requests: 20, Failures: 3, Slow: 4}, true, true},
		{"too few requests", &pb.PassiveResult{Requests: 9, Failures: 9}, false, true},
		{"ignored ones are not judged", &pb.PassiveResult{Requests: 20, Ignored: 12, Failures: 8}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rule.trips(tc.w); got != tc.rule {
				t.Errorf("with the rule: trips = %v, want %v", got, tc.rule)
			}
			if got := none.trips(tc.w); got != tc.none {
				t.Errorf("without a rule: trips = %v, want %v", got, tc.none)
			}
		})
	}
	// Failures that come one by one are reported when the window trips,
	// not before.
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	windows := map[string]*pb.PassiveResult{"a": {Requests: 20}}
	trig := newTrigger(func(a string) *pb.PassiveResult { return windows[a] }, func() time.Time { return now })
	trig.minRequests, trig.failureRatio = 10, 0.3
	trig.track(&pb.Batch{Jobs: []*pb.ProbeJob{{Address: "a"}}})
	for f := uint32(1); f <= 10; f++ {
		now = now.Add(triggerPoll)
		windows["a"] = &pb.PassiveResult{Requests: 20, Failures: f}
		rep := trig.poll()
		if want := f == 7; (rep != nil) != want {
			t.Fatalf("%d failures of 20: reported %v, want %v", f, rep != nil, want)
		}
	}
}

// BenchmarkTriggerPoll: one look at triggerMaxOrigins watched windows (a
// node looks four times a second), the windows read by a stand-in that
// returns a fixed window: the trigger's own cost.
func BenchmarkTriggerPoll(b *testing.B) {
	w := &pb.PassiveResult{Requests: 20, Failures: 1}
	trig := newTrigger(func(string) *pb.PassiveResult { return w }, time.Now)
	trig.minRequests, trig.failureRatio = 10, 0.3
	batch := &pb.Batch{}
	for i := range triggerMaxOrigins {
		batch.Jobs = append(batch.Jobs, &pb.ProbeJob{Address: fmt.Sprintf("https://origin-%d.example.net", i)})
	}
	trig.track(batch)
	b.ReportAllocs()
	for b.Loop() {
		if trig.poll() != nil {
			b.Fatal("a window that does not trip was reported")
		}
	}
	b.ReportMetric(float64(len(trig.origins)), "origins")
}
