package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
)

// TestHistoryReplayAgreesWithEngine: what the history keeps is enough for
// the replay to give the agent's path partitions. Every partition
// scenario of core/simulate runs through the engine (its sources casting
// the timeline's votes, as in TestPartitionAgreesWithSimulate) with the
// history feed, on a clock that moves one round_interval a round; the
// file is exported and replayed under the same configuration, and the
// replay gives exactly the path_partition_suspected events and the
// switches the engine journaled, each at its round.
func TestHistoryReplayAgreesWithEngine(t *testing.T) {
	dir := filepath.Join("..", "simulate", "testdata", "partition")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		n++
		t.Run(ent.Name(), func(t *testing.T) {
			sc := filepath.Join(dir, ent.Name())
			cfg, diags := config.Load(filepath.Join(sc, "config.hcl"))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			tl, err := os.ReadFile(filepath.Join(sc, "timeline.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			steps, err := simulate.ParseTimeline(bytes.NewReader(tl), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recordAndReplay(t, cfg, steps)
		})
	}
	if n == 0 {
		t.Fatal("no partition scenarios")
	}
}

func recordAndReplay(t *testing.T, cfg *config.Config, steps []simulate.Step) {
	t.Helper()
	label := cfg.Control.Partition.Label
	voters := map[string]string{}
	for _, st := range steps {
		if st.Round == nil || st.Confirm {
			t.Fatalf("timeline line %d: this test replays rounds only", st.Line)
		}
		for _, bySrc := range st.Labels {
			for _, values := range bySrc {
				for _, v := range values {
					if v != "" {
						voters[label+"="+v] = v
					}
				}
			}
		}
	}
	var mu sync.Mutex
	cur := &simulate.Step{}
	var clock sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tick := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}
	dataDir := t.TempDir()
	st, err := store.Open(dataDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, diags := New(context.Background(), cfg, Options{Store: st, Now: tick,
		NewSource: func(src *config.Source, _ string, _ hclog.Logger) VoteSource {
			return &stepSource{name: src.Name, label: label, mu: &mu, step: cur, voters: voters}
		}})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	e.mu.Lock()
	p := e.partitionSetup()
	vl := &voterLabels{values: map[string]string{}, reporting: map[string]bool{}}
	for _, s := range cfg.Sources {
		vl.reporting[s.Name] = true
		for voter, value := range voters {
			vl.values[s.Name+"\x00"+voter] = value
		}
	}
	p.labels.Store(vl)
	e.mu.Unlock()
	h := OpenHistory(dataDir, e, HistoryOptions{Now: tick})
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	for i, step := range steps {
		mu.Lock()
		*cur = step
		mu.Unlock()
		if i > 0 {
			clock.Lock()
			now = now.Add(cfg.Control.RoundInterval)
			clock.Unlock()
		}
		res := e.RunRound(ctx)
		if !res.Saved {
			t.Fatalf("timeline line %d: the round was not saved", step.Line)
		}
		h.AfterRound(res)
		h.Flush() // a batch never finds the writer busy: none is dropped
	}
	journal, err := e.Events(ctx, 0, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := history.ReadSnapshot(filepath.Join(dataDir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var names []simulate.Names
	var sources []string
	for _, s := range cfg.Sources {
		sources = append(sources, s.Name)
	}
	for _, s := range cfg.Sites {
		for _, o := range s.Origins {
			names = append(names, simulate.Names{Site: s.Name, Origin: o.Name})
		}
	}
	x := simulate.BuildExport(snap, names, simulate.ExportHeader{Names: "config", RoundInterval: cfg.Control.RoundInterval.String(),
		Sources: sources, Journal: "included", PartitionLabel: label}, journal)
	res, err := simulate.Replay(x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Partitions || len(res.Warnings) != 0 {
		t.Fatalf("partitions replayed %v, warnings %q", res.Partitions, res.Warnings)
	}
	want := map[string][]simulate.PartitionEvent{}
	wantSw := map[string][]string{}
	for _, ev := range journal {
		switch ev.Event.Kind {
		case decide.KindPathPartitionSuspected:
			want[ev.Site] = append(want[ev.Site], simulate.PartitionEvent{Time: ev.Time.UTC().Truncate(time.Second), Origin: ev.Event.Origin, Group: ev.Event.Group, Rounds: ev.Event.Rounds, Suspected: ev.Event.Suspected})
		case decide.KindLevelSwitched:
			wantSw[ev.Site] = append(wantSw[ev.Site], fmt.Sprintf("%s %d->%d", ev.Time.UTC().Format("15:04:05"), ev.Event.FromLevel, ev.Event.ToLevel))
		}
	}
	events := 0
	for _, s := range res.Sites {
		events += len(s.ReplayedPartitions)
		if fmt.Sprint(s.ReplayedPartitions) != fmt.Sprint(want[s.Site]) {
			t.Errorf("site %s: the replay gives\n %v\nthe engine journaled\n %v", s.Site, s.ReplayedPartitions, want[s.Site])
		}
		var sw []string
		for _, r := range s.Replayed {
			sw = append(sw, fmt.Sprintf("%s %d->%d", r.Time.Format("15:04:05"), r.From, r.To))
		}
		if fmt.Sprint(sw) != fmt.Sprint(wantSw[s.Site]) {
			t.Errorf("site %s: replayed switches %v, journaled %v", s.Site, sw, wantSw[s.Site])
		}
	}
	total := 0
	for _, w := range want {
		total += len(w)
	}
	if events != total {
		t.Errorf("the replay gives %d partition events over its sites, the engine journaled %d", events, total)
	}
}
