package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/store"
)

// startPodIn is startPod with the engine's data in dir, for its history.
func startPodIn(t *testing.T, src, dir string) (*engine.Engine, *podSource) {
	t.Helper()
	cfg, diags := config.Parse("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	pod := &podSource{down: map[string]bool{}}
	e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st,
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return pod }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	return e, pod
}

// With control { partition }, each round's history entry says the rule
// ran and keeps the groups whose every vote was down in a round with an
// up vote: what a replay needs to run the rule again. A round in which
// nobody voted up keeps none (no group can be alone), and without the
// partition block no round says the rule ran.
func TestHistoryRecordsDownGroups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, pod := startPodIn(t, partitionConfig, dir)
	h := engine.OpenHistory(dir, e, engine.HistoryOptions{})
	t.Cleanup(func() { h.Close() })
	path := filepath.Join(dir, engine.HistoryFile)
	last := func(origin string) history.Point {
		t.Helper()
		h.Flush()
		snap, err := history.ReadSnapshot(path)
		if err != nil {
			t.Fatal(err)
		}
		p := snap.Origins[history.Key("www", origin)].Points
		if len(p) == 0 {
			t.Fatalf("%s has no recorded round", origin)
		}
		return p[len(p)-1]
	}
	pod.set("eu-1", "a1", true)
	// The voters' labels arrive in the background: until they do, both
	// voters are in the group "node", which is not down. Wait for a round
	// that grouped them by pop (a hang guard only).
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.AfterRound(e.RunRound(ctx))
		p := last("a1")
		if !p.Partition {
			t.Fatalf("a round with the rule on does not say it ran: %+v", p)
		}
		if len(p.DownGroups) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no round grouped the voters by their pop label in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for r := range 3 {
		if r > 0 {
			h.AfterRound(e.RunRound(ctx))
		}
		if p := last("a1"); !p.Partition || !slices.Equal(p.DownGroups, []string{"node/pop=eu"}) || p.GroupsCut {
			t.Fatalf("a1, round %d of eu alone: %+v, want the group node/pop=eu", r+1, p)
		}
		if p := last("b1"); !p.Partition || len(p.DownGroups) != 0 {
			t.Fatalf("b1, every voter up: %+v, want the rule ran and no group down", p)
		}
	}
	if got := partitionEvents(t, e); len(got) == 0 || !got[0].Suspected {
		t.Fatalf("the journal after the recorded rounds: %+v, want the suspicion", got)
	}
	// Nobody up: no group is kept.
	pod.set("us-1", "a1", true)
	h.AfterRound(e.RunRound(ctx))
	if p := last("a1"); !p.Partition || len(p.DownGroups) != 0 {
		t.Fatalf("a1 down for every voter: %+v, want no group kept", p)
	}
}

func TestHistoryWithoutPartitionRule(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, pod := startPodIn(t, `
source "node" { plugin = "vigil-source-node" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`, dir)
	h := engine.OpenHistory(dir, e, engine.HistoryOptions{})
	t.Cleanup(func() { h.Close() })
	pod.set("eu-1", "a1", true)
	for range 2 {
		h.AfterRound(e.RunRound(ctx))
		h.Flush() // a batch never finds the writer busy: none is dropped
	}
	snap, err := history.ReadSnapshot(filepath.Join(dir, engine.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Origins[history.Key("www", "a1")].Points
	if len(p) != 2 {
		t.Fatalf("points %+v", p)
	}
	for _, pt := range p {
		if pt.Partition || pt.DownGroups != nil || len(pt.Votes) != 1 {
			t.Fatalf("a round without the partition block: %+v, want its votes and no partition data", pt)
		}
	}
}
