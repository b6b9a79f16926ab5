package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// stepSource casts a timeline step's votes as a source of the engine: a
// vote "down@pop=eu" comes from the voter "pop=eu", which its status
// lists with the label pop=eu; an unlabelled vote from a voter its status
// does not list.
type stepSource struct {
	name  string
	label string
	mu    *sync.Mutex
	step  *simulate.Step
	// voters are the labelled voters of the whole timeline.
	voters map[string]string
}

func (s *stepSource) Name() string                          { return s.name }
func (s *stepSource) Start(context.Context) hcl.Diagnostics { return nil }
func (s *stepSource) Close()                                {}

func (s *stepSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sdk.Vote
	for _, t := range b.Targets {
		key := t.Site + "/" + t.Origin
		labels := s.step.Labels[key][s.name]
		for i, v := range s.step.Round[key][s.name] {
			voter := fmt.Sprintf("unlisted-%d", i)
			if labels != nil && labels[i] != "" {
				voter = s.label + "=" + labels[i]
			}
			sv := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voter, Value: sdk.Up, Reason: sdk.ReasonOK}
			if v == vote.VerdictDown {
				sv.Value, sv.Reason = sdk.Down, sdk.ReasonConnectFailed
			}
			out = append(out, sv)
		}
	}
	return out, nil
}

func (s *stepSource) Status(context.Context) (sdk.Status, error) {
	var st sdk.Status
	for voter, value := range s.voters {
		st.Items = append(st.Items, sdk.StatusItem{Name: voter, State: "online", Labels: map[string]string{s.label: value}})
	}
	return st, nil
}

// partitionLine is one path_partition_suspected event and its round.
type partitionLine struct {
	Round uint64
	Site  string
	Event decide.Event
}

// TestPartitionAgreesWithSimulate: the agent and `vigil simulate` run the
// same rule. Every partition scenario of core/simulate runs through the
// engine, its sources casting the timeline's votes as voters with the
// written labels, and the engine journals exactly the
// path_partition_suspected events simulate prints, in the same rounds.
func TestPartitionAgreesWithSimulate(t *testing.T) {
	dir := filepath.Join("..", "simulate", "testdata", "partition")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
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
			want := simulatedPartitions(t, cfg, steps)
			if len(want) == 0 && ent.Name() != "really-down" {
				t.Fatalf("simulate printed no suspicion: the scenario shows nothing to agree on")
			}
			got := enginePartitions(t, cfg, steps)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the engine journaled\n %v\nsimulate printed\n %v", got, want)
			}
		})
	}
}

func simulatedPartitions(t *testing.T, cfg *config.Config, steps []simulate.Step) []partitionLine {
	t.Helper()
	var out bytes.Buffer
	if err := simulate.Run(cfg, steps, &out); err != nil {
		t.Fatal(err)
	}
	var lines []partitionLine
	dec := json.NewDecoder(&out)
	for dec.More() {
		var l simulate.RoundLine
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		for _, ev := range l.Events {
			if ev.Kind == decide.KindPathPartitionSuspected {
				lines = append(lines, partitionLine{uint64(l.Round), l.Site, ev})
			}
		}
	}
	return lines
}

func enginePartitions(t *testing.T, cfg *config.Config, steps []simulate.Step) []partitionLine {
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
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e, diags := New(context.Background(), cfg, Options{Store: st,
		NewSource: func(src *config.Source, _ string, _ hclog.Logger) VoteSource {
			return &stepSource{name: src.Name, label: label, mu: &mu, step: cur, voters: voters}
		}})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	// The labels as the background refresh copies them, in place before
	// the first round (the refresh itself is tested in partition_test.go).
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
	ctx := context.Background()
	for _, step := range steps {
		mu.Lock()
		*cur = step
		mu.Unlock()
		if res := e.RunRound(ctx); !res.Saved {
			t.Fatalf("timeline line %d: the round was not saved", step.Line)
		}
	}
	evs, err := e.Events(ctx, 0, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	var lines []partitionLine
	for _, ev := range evs {
		if ev.Event.Kind == decide.KindPathPartitionSuspected {
			lines = append(lines, partitionLine{ev.Round, ev.Site, ev.Event})
		}
	}
	return lines
}
