package readmodel

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
)

// everyEvent is one event of every kind, with every origin state and
// every switch reason.
func everyEvent() []decide.Event {
	var out []decide.Event
	healths := []decide.Health{decide.Unknown, decide.Healthy, decide.Unhealthy, decide.Disabled}
	for _, from := range healths {
		for _, to := range healths {
			out = append(out, decide.Event{Kind: decide.KindOriginState, Origin: "a1", From: from, To: to})
		}
	}
	for _, r := range []decide.Reason{decide.ReasonFailover, decide.ReasonFailback, decide.ReasonManual, decide.ReasonConfig} {
		out = append(out, decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: r})
	}
	out = append(out,
		decide.Event{Kind: decide.KindFailbackAvailable, Level: 1},
		decide.Event{Kind: decide.KindAllLevelsUnhealthy, Level: 3},
		decide.Event{Kind: decide.KindOriginFlapping, Origin: "b1", Flapping: true},
		decide.Event{Kind: decide.KindOriginFlapping, Origin: "b1"},
		decide.Event{Kind: decide.KindPathPartitionSuspected, Origin: "a1", Group: "node/pop=eu", Rounds: 4, Suspected: true},
		decide.Event{Kind: decide.KindPathPartitionSuspected, Origin: "a1", Group: "direct", Rounds: 7},
		decide.Event{Kind: decide.KindDrillStarted, Level: 1, Seconds: 300},
		decide.Event{Kind: decide.KindDrillEnded, Level: 1, End: decide.DrillEndAborted},
		decide.Event{Kind: decide.KindRampStep, Level: 1, FromLevel: 2, Weight: 50},
		decide.Event{Kind: decide.KindRampStep, Level: 1, FromLevel: 2, Weight: 100},
		decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover, Drill: true},
		decide.Event{Kind: decide.KindFailoverTimed, Drill: true, Report: `{"site":"www","from_level":1,"to_level":2,"drill":true,"seq":9,"round":4,"complete":true,"origin":"a1","first_failure":"2026-12-02T07:00:00.000Z","round_started":"2026-12-02T07:00:02.000Z","decided":"2026-12-02T07:00:02.012Z","committed":"2026-12-02T07:00:02.015Z","published":"2026-12-02T07:00:02.016Z","publication":5,"detect_seconds":2.012,"commit_seconds":0.003,"publish_seconds":0.004,"edge_seconds":0.02,"total_seconds":2.036,"nodes":[{"node":"edge-1","reported":true,"version":5,"applied":"2026-12-02T07:00:02.036Z","edge_seconds":0.02,"result":"ok","proxying":true,"last_request":"2026-12-02T07:00:02.030Z","last_request_seconds":2.03,"visitor_requests":12,"visitor_errors":1},{"node":"edge-old","reported":false,"visitor_requests":0,"visitor_errors":0}]}`},
	)
	return out
}

// TestEventWireFormIsTheCores: the API's event marshals to the very bytes
// of the decision core's, prints the same line, and reads back to itself,
// for every kind, state and reason; so `vigil events -json`, the site
// views and the action answers did not change when api/ got its own type.
func TestEventWireFormIsTheCores(t *testing.T) {
	kinds := map[decide.EventKind]bool{}
	for _, e := range everyEvent() {
		kinds[e.Kind] = true
		t.Run(e.String(), func(t *testing.T) {
			want, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			w := Event(e)
			got, err := json.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("api form %s, core form %s", got, want)
			}
			if w.String() != e.String() {
				t.Errorf("api line %q, core line %q", w.String(), e.String())
			}
			var back api.Event
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatalf("the API cannot read the core's %s: %v", want, err)
			}
			if !reflect.DeepEqual(back, w) {
				t.Errorf("read back %+v, want %+v", back, w)
			}
		})
	}
	for k := decide.EventKind(1); k <= decide.LastKind; k++ {
		if !kinds[k] {
			t.Errorf("kind %s is not in the table: add an example", k)
		}
	}
	if len(api.EventKinds) != int(decide.LastKind) {
		t.Fatalf("api.EventKinds has %d kinds, the core %d", len(api.EventKinds), decide.LastKind)
	}
	for i, k := range api.EventKinds {
		if want := decide.EventKind(i + 1).String(); string(k) != want {
			t.Errorf("api.EventKinds[%d] = %q, the core's kind %d is %q", i, k, i+1, want)
		}
	}
}

// TestEventRefusals: the API reads what the core refuses as an error
// too, naming what is wrong.
func TestEventRefusals(t *testing.T) {
	for _, in := range []string{
		`{"kind":"no_such_kind"}`,
		`{"kind":"origin_state","origin":"a1","from":"healthy","to":"sideways"}`,
		`{"kind":"level_switched","from":1,"to":2,"reason":"whim"}`,
		`{"kind":"origin_flapping","origin":"a1"}`,
		`{"kind":"path_partition_suspected","origin":"a1","group":"direct","rounds":3}`,
	} {
		t.Run(in, func(t *testing.T) {
			var c decide.Event
			coreErr := json.Unmarshal([]byte(in), &c)
			var a api.Event
			apiErr := json.Unmarshal([]byte(in), &a)
			if coreErr == nil || apiErr == nil {
				t.Fatalf("core error %v, api error %v: want both to refuse", coreErr, apiErr)
			}
			if coreErr.Error() != apiErr.Error() {
				t.Errorf("api says %q, core says %q", apiErr, coreErr)
			}
		})
	}
}

// TestEventsNilStaysNull: an action that made no event answers null, as
// before; a view's empty list is [].
func TestEventsNilStaysNull(t *testing.T) {
	if Events(nil) != nil {
		t.Error("Events(nil) is not nil")
	}
	if got := Events([]decide.Event{}); got == nil || len(got) != 0 {
		t.Errorf("Events of an empty slice = %#v, want an empty slice", got)
	}
}
