package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

const historyConfig = `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a" { address = "http://127.0.0.1:1" }
  origin "b" {
    address = "http://127.0.0.1:2"
    level = 2
  }
}
`

// Each round's verdicts reach the history, and a failover shows in it:
// the primary's down verdicts and its state after each round; whether the
// feed observes the engine's commits (as the agent wires it) or is handed
// each round's result.
func TestHistoryRecordsRounds(t *testing.T) {
	for _, observer := range []bool{true, false} {
		name := "after round"
		if observer {
			name = "observer"
		}
		t.Run(name, func(t *testing.T) { testHistoryRecordsRounds(t, observer) })
	}
}

func testHistoryRecordsRounds(t *testing.T, observer bool) {
	dir := t.TempDir()
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, historyConfig), src, dir)
	h := engine.OpenHistory(dir, e, engine.HistoryOptions{})
	t.Cleanup(func() { h.Close() })
	if observer {
		e.Observe(h)
	}
	ctx := context.Background()
	round := func() {
		t.Helper()
		res := e.RunRound(ctx)
		if !observer {
			h.AfterRound(res)
		}
		h.Flush()
	}
	for range 3 {
		round()
	}
	src["direct"].SetDown("www", "a", true)
	for range 3 {
		round()
	}
	got, err := h.SiteHistory("www")
	if err != nil || got == nil || !got.Kept {
		t.Fatalf("SiteHistory: %+v, %v", got, err)
	}
	a := got.Origins["a"]
	if len(a.Recent) != 6 {
		t.Fatalf("a has %d points, want 6: %+v", len(a.Recent), a.Recent)
	}
	var verdicts, states string
	for _, p := range a.Recent {
		verdicts += p.Verdict[:1]
		states += p.State[:1]
	}
	// unhealthy_threshold 3, healthy_threshold 2 (the defaults).
	if verdicts != "uuuddd" || states != "uhhhhu" {
		t.Errorf("verdicts %s, states %s; want uuuddd, uhhhhu", verdicts, states)
	}
	if a.Uptime1h == nil || *a.Uptime1h != 50 || a.Judged1h != 6 {
		t.Errorf("uptime_1h %v over %d, want 50 over 6", a.Uptime1h, a.Judged1h)
	}
	if b := got.Origins["b"]; len(b.Recent) != 6 || *b.Uptime7d != 100 {
		t.Errorf("b: %+v", b)
	}
	if v, _ := h.SiteHistory("nope"); v != nil {
		t.Errorf("an unknown site has a history: %+v", v)
	}
	if _, err := os.Stat(filepath.Join(dir, engine.HistoryFile)); err != nil {
		t.Errorf("no history file in data_dir: %v", err)
	}

	// A reload that adds a site gives it a slot; the old site keeps its own.
	if diags := e.Reload(ctx, enginetest.Config(t, historyConfig+`
site "new" {
  hostname = "new.example.com"
  origin "a" { address = "http://127.0.0.1:3" }
  origin "b" { address = "http://127.0.0.1:4" }
}`)); diags.HasErrors() {
		t.Fatal(diags)
	}
	round()
	n, _ := h.SiteHistory("new")
	if len(n.Origins["a"].Recent) != 1 {
		t.Errorf("the new site after a round: %+v", n)
	}
	w, _ := h.SiteHistory("www")
	if len(w.Origins["a"].Recent) != 7 {
		t.Errorf("www after the reload has %d points, want 7", len(w.Origins["a"].Recent))
	}
}

func TestNoHistory(t *testing.T) {
	h := engine.NoHistory("etcd")
	h.AfterRound(engine.RoundResult{Round: 1, Saved: true, Probed: 1})
	got, err := h.SiteHistory("www")
	if err != nil || got.Kept || got.Note != "etcd" || len(got.Origins) != 0 {
		t.Errorf("%+v %v", got, err)
	}
	if err := h.Close(); err != nil {
		t.Error(err)
	}
}
