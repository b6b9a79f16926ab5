package engine_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestFailoverTimes: the engine times a failover on its own clock: the
// first failure is the start of the first round that judged the origin
// down, the decision the round that switched, and the report waits for
// the known node's acknowledgement, then is journaled as failover_timed
// with the very figures the API serves, and read back after a restart.
func TestFailoverTimes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: t0}
	start := func() *engine.Engine {
		st, err := store.Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		src := enginetest.Sources{}
		e, diags := engine.New(ctx, enginetest.Config(t, twoLevels), engine.Options{Store: st, NewSource: src.Factory(), Now: clock.Now})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		t.Cleanup(func() {
			e.Close()
			st.Close()
		})
		if src["direct"] != nil {
			src["direct"].SetDown("www", "a1", true)
			src["direct"].SetDown("www", "a2", true)
		}
		return e
	}
	st, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := enginetest.Sources{}
	e, diags := engine.New(ctx, enginetest.Config(t, twoLevels), engine.Options{Store: st, NewSource: src.Factory(), Now: clock.Now})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	round := func() time.Time {
		clock.advance(time.Second)
		at := clock.Now()
		e.RunRound(ctx)
		return at
	}
	round()
	round()
	// A node follows the publication.
	e.FailoverApplied(publication.Applied{Node: "edge-1", Version: e.Hub().Current().Version, At: clock.Now()})

	src["direct"].SetDown("www", "a1", true)
	src["direct"].SetDown("www", "a2", true)
	first := round()
	round()
	decided := round()
	if lvl := e.Views().Site("www").Level; lvl != 2 {
		t.Fatalf("level %d after three failed rounds", lvl)
	}
	reps, err := e.FailoverReports(ctx, "www", 0)
	if err != nil || len(reps) != 1 || reps[0].Complete {
		t.Fatalf("right after the switch: %v %+v", err, reps)
	}
	version := e.Hub().Current().Version
	e.FailoverApplied(publication.Applied{Node: "edge-1", Version: version, At: decided.Add(250 * time.Millisecond)})
	round() // journals the complete report

	evs, err := e.Events(ctx, 0, "www", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var switched, timed *store.Event
	for i := range evs {
		switch evs[i].Event.Kind {
		case decide.KindLevelSwitched:
			switched = &evs[i]
		case decide.KindFailoverTimed:
			timed = &evs[i]
		}
	}
	if switched == nil || timed == nil {
		t.Fatalf("journal: %+v", evs)
	}
	reps, err = e.FailoverReports(ctx, "www", 0)
	if err != nil || len(reps) != 1 {
		t.Fatalf("%v %+v", err, reps)
	}
	rep := reps[0]
	var journaled api.FailoverReport
	if err := json.Unmarshal([]byte(timed.Event.Report), &journaled); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(journaled, rep) {
		t.Errorf("journaled %+v\nserved %+v", journaled, rep)
	}
	f := func(v float64) *float64 { return &v }
	want := api.FailoverReport{Site: "www", FromLevel: 1, ToLevel: 2, Seq: switched.Seq, Round: switched.Round, Complete: true, Origin: "a1",
		FirstFailure: api.NewReportTime(first), RoundStarted: api.ReportTime{Time: decided}, Decided: api.ReportTime{Time: decided},
		Committed: api.NewReportTime(decided), Published: api.NewReportTime(decided), Publication: version,
		DetectSeconds: f(2), CommitSeconds: f(0), PublishSeconds: f(0), EdgeSeconds: f(0.25), TotalSeconds: f(2.25),
		Nodes: []api.FailoverNode{{Node: "edge-1", Reported: true, Version: version, Applied: api.NewReportTime(decided.Add(250 * time.Millisecond)),
			EdgeSeconds: f(0.25), Result: "ok"}}}
	if !reflect.DeepEqual(rep, want) {
		gb, _ := json.Marshal(rep)
		wb, _ := json.Marshal(want)
		t.Errorf("report\n%s\nwant\n%s", gb, wb)
	}
	if !switched.Time.Equal(decided) {
		t.Errorf("the journal's switch at %s, the report's round at %s", switched.Time, decided)
	}

	// After a restart the report is read back from the journal.
	e.Close()
	st.Close()
	e2 := start()
	back, err := e2.FailoverReports(ctx, "www", 5)
	if err != nil || len(back) != 1 || !reflect.DeepEqual(back[0], rep) {
		t.Fatalf("after a restart: %v %+v", err, back)
	}
}
