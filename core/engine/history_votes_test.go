package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/history"
)

// Each round's per-source tallies reach the file: the source asked, in
// chain order, and its up, down and abstain votes.
func TestHistoryRecordsVotes(t *testing.T) {
	dir := t.TempDir()
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, historyConfig), src, dir)
	h := engine.OpenHistory(dir, e, engine.HistoryOptions{})
	ctx := context.Background()
	h.AfterRound(e.RunRound(ctx))
	h.Flush() // a batch never finds the writer busy: none is dropped
	src["direct"].SetDown("www", "a", true)
	h.AfterRound(e.RunRound(ctx))
	h.Flush()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := history.ReadSnapshot(filepath.Join(dir, engine.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Origins[history.Key("www", "a")].Points
	if len(p) != 2 {
		t.Fatalf("points %+v", p)
	}
	up, down := history.Tally{Source: 0, Up: 1}, history.Tally{Source: 0, Down: 1}
	if len(p[0].Votes) != 1 || p[0].Votes[0] != up || len(p[1].Votes) != 1 || p[1].Votes[0] != down {
		t.Fatalf("votes %+v then %+v, want %+v then %+v", p[0].Votes, p[1].Votes, up, down)
	}
}
