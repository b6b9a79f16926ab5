package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// RoundTrip writes sites, a deletion, eight events, a cursor and a probe
// mark to s (a
// store whose journal keeps 5 events), then checks what reopen returns:
// the same data read back by a fresh store on the same backing (reopen may
// close s first). Meta, sites, the deletion, the cursor, the journal bound
// and the journal's site filter are all checked.
func RoundTrip(t *testing.T, s store.Store, reopen func() store.Store) {
	t.Helper()
	ctx := context.Background()
	var events []store.Event
	for i := uint64(1); i <= 8; i++ {
		events = append(events, store.Event{Seq: i, Site: []string{"a", "b"}[i%2], Event: decide.Event{Kind: decide.KindFailbackAvailable, Level: int(i)}})
	}
	b := store.Batch{
		Meta:   store.Meta{Round: 4, LastEvent: 8, Publication: 3},
		Sites:  []store.Site{{Name: "www", Level: 2, ManualHold: true, Baseline: map[int]string{1: "healthy"}, Origins: map[string]store.Origin{"a1": {State: "unhealthy", Failures: 3}}}, {Name: "gone"}},
		Events: events,
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, store.Batch{Meta: b.Meta, Deleted: []string{"gone"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCursor(ctx, "hook", 6); err != nil {
		t.Fatal(err)
	}
	// A partial round's probe marks, then a round that probed every site.
	marked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.Commit(ctx, store.Batch{Meta: b.Meta, Probed: []store.Probe{{Site: "www", Round: 9, At: marked}}}); err != nil {
		t.Fatal(err)
	}
	meta, cursors, err := s.Cursors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if meta != b.Meta || cursors["hook"] != 6 {
		t.Fatalf("Cursors = %+v %v, want the meta and the hook's cursor 6", meta, cursors)
	}

	s = reopen()
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	www := st.Sites["www"]
	tests := []struct {
		name string
		ok   bool
	}{
		{"meta", st.Meta == b.Meta},
		{"site level and hold", www.Level == 2 && www.ManualHold},
		{"baseline", www.Baseline[1] == "healthy"},
		{"origin counters", www.Origins["a1"].Failures == 3 && www.Origins["a1"].State == "unhealthy"},
		{"deleted site gone", len(st.Sites) == 1},
		{"cursor", st.Cursors["hook"] == 6},
		{"probe mark", www.LastProbed == 9 && www.LastProbedAt.Equal(marked)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Fatalf("state after reopen: %+v", st)
			}
		})
	}
	all, err := s.Events(ctx, 0, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 || all[0].Seq != 4 || all[4].Seq != 8 {
		t.Fatalf("journal kept %d events; want the newest 5 (4..8): %+v", len(all), all)
	}
	if all[0].Event.Kind != decide.KindFailbackAvailable || all[0].Event.Level != 4 {
		t.Fatalf("event not round-tripped: %+v", all[0])
	}
	onlyA, err := s.Events(ctx, 5, "a", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(onlyA) != 2 || onlyA[0].Seq != 6 || onlyA[1].Seq != 8 {
		t.Fatalf("events of site a after 5: %+v, want 6 and 8", onlyA)
	}
}
