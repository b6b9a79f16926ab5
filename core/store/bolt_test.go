package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

func TestBoltRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := store.Open(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := store.Open(dir, 5); err == nil || !strings.Contains(err.Error(), "another vigil agent") {
		t.Fatalf("a second open must be refused clearly, got %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = store.Open(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
		t.Fatalf("journal kept %d events from %d; want the newest 5 (4..8)", len(all), all[0].Seq)
	}
	if all[0].Event.Kind != decide.KindFailbackAvailable || all[0].Event.Level != 4 {
		t.Fatalf("event not round-tripped: %+v", all[0])
	}
	onlyA, _ := s.Events(ctx, 5, "a", 100)
	for _, e := range onlyA {
		if e.Site != "a" || e.Seq <= 5 {
			t.Fatalf("filter returned %+v", e)
		}
	}
	if len(onlyA) != 2 {
		t.Fatalf("%d events of site a after 5, want 2 (6, 8)", len(onlyA))
	}
}
