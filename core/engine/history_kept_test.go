package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
)

// The API's recent is the strip's last 60 rounds; kept_rounds and
// kept_since say what the file keeps beyond (a steady origin: every
// round, in one run), on the engine's clock of 30 s rounds.
func TestHistoryKeepsMoreThanTheStrip(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(tick.Load()) * 30 * time.Second) }
	e, diags := engine.New(context.Background(), enginetest.Config(t, historyConfig), engine.Options{Store: st, NewSource: enginetest.Sources{}.Factory(), Now: now})
	if diags.HasErrors() {
		st.Close()
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	h := engine.OpenHistory(dir, e, engine.HistoryOptions{Now: now})
	t.Cleanup(func() { h.Close() })
	e.Observe(h)
	const rounds = 75
	for i := range rounds {
		tick.Store(int64(i))
		e.RunRound(context.Background())
		h.Flush()
	}
	got, err := h.SiteHistory("www")
	if err != nil || got == nil || !got.Kept {
		t.Fatalf("SiteHistory: %+v, %v", got, err)
	}
	a := got.Origins["a"]
	if got.Rounds != 60 || len(a.Recent) != 60 || a.KeptRounds != rounds || a.Cut {
		t.Fatalf("rounds %d, %d recent, kept %d, cut %v; want 60, 60, %d, not cut", got.Rounds, len(a.Recent), a.KeptRounds, a.Cut, rounds)
	}
	if a.KeptSince == nil || !a.KeptSince.Equal(t0) {
		t.Errorf("kept_since %v, want the first round %v", a.KeptSince, t0)
	}
	if first := t0.Add((rounds - 60) * 30 * time.Second); !a.Recent[0].Time.Equal(first) {
		t.Errorf("recent begins %v, want %v", a.Recent[0].Time, first)
	}
	if a.DataSince == nil || !a.DataSince.Equal(t0) {
		t.Errorf("data_since %v, want %v", a.DataSince, t0)
	}
}
