package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// podSource is a node-like source: two voters with a pop label, and a
// set of voters that see some origin down.
type podSource struct {
	mu     sync.Mutex
	down   map[string]bool // voter/origin
	status int             // Status calls
}

func (p *podSource) Name() string                          { return "node" }
func (p *podSource) Start(context.Context) hcl.Diagnostics { return nil }
func (p *podSource) Close()                                {}
func (p *podSource) set(voter, origin string, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down[voter+"/"+origin] = down
}
func (p *podSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []sdk.Vote
	for _, t := range b.Targets {
		for _, voter := range []string{"eu-1", "us-1"} {
			v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voter, Value: sdk.Up, Reason: sdk.ReasonOK}
			if p.down[voter+"/"+t.Origin] {
				v.Value, v.Reason = sdk.Down, sdk.ReasonConnectFailed
			}
			out = append(out, v)
		}
	}
	return out, nil
}
func (p *podSource) Status(context.Context) (sdk.Status, error) {
	p.mu.Lock()
	p.status++
	p.mu.Unlock()
	return sdk.Status{Items: []sdk.StatusItem{
		{Name: "eu-1", State: "online", Labels: map[string]string{"pop": "eu"}},
		{Name: "us-1", State: "online", Labels: map[string]string{"pop": "us"}},
	}}, nil
}

const partitionConfig = `
control {
  round_interval = "1s"
  partition {
    label  = "pop"
    rounds = 3
  }
}
source "node" { plugin = "vigil-source-node" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

func startPod(t *testing.T, src string) (*engine.Engine, *podSource) {
	t.Helper()
	cfg, diags := config.Parse("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := store.Open(t.TempDir(), 0)
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

func partitionEvents(t *testing.T, e *engine.Engine) []decide.Event {
	t.Helper()
	evs, err := e.Events(context.Background(), 0, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []decide.Event
	for _, ev := range evs {
		if ev.Event.Kind == decide.KindPathPartitionSuspected {
			out = append(out, ev.Event)
		}
	}
	return out
}

func TestPathPartitionSuspected(t *testing.T) {
	ctx := context.Background()
	e, pod := startPod(t, partitionConfig)
	// The labels arrive in the background: wait for the first refresh.
	e.RunRound(ctx)
	for deadline := time.Now().Add(time.Minute); !e.VoterLabelsLoaded(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the voters' labels never arrived (a hang)")
		}
	}
	pod.set("eu-1", "a1", true)
	for r := 1; r <= 2; r++ {
		e.RunRound(ctx)
		if got := partitionEvents(t, e); len(got) != 0 {
			t.Fatalf("round %d of disagreement: %v, want nothing before 3 rounds", r, got)
		}
	}
	e.RunRound(ctx)
	got := partitionEvents(t, e)
	if len(got) != 1 || !got[0].Suspected || got[0].Group != "node/pop=eu" || got[0].Origin != "a1" || got[0].Rounds != 3 {
		t.Fatalf("after 3 rounds: %+v, want one suspicion of node/pop=eu on a1", got)
	}
	v := e.Views().Site("www")
	if p := v.Origins["a1"].Partitions; len(p) != 1 || p[0].Group != "node/pop=eu" || p[0].Rounds != 3 {
		t.Fatalf("a1's view: partitions %+v", p)
	}
	if len(v.Origins["b1"].Partitions) != 0 || v.Level != 1 {
		t.Fatalf("b1 %+v, level %d: the suspicion must change nothing else", v.Origins["b1"].Partitions, v.Level)
	}
	e.RunRound(ctx)
	if p := e.Views().Site("www").Origins["a1"].Partitions; len(p) != 1 || p[0].Rounds != 4 {
		t.Fatalf("4th round: %+v", p)
	}
	// Both see it down: a real outage, not a partition.
	pod.set("us-1", "a1", true)
	e.RunRound(ctx)
	got = partitionEvents(t, e)
	if len(got) != 2 || got[1].Suspected || got[1].Rounds != 4 {
		t.Fatalf("after everyone voted down: %+v, want the end after 4 rounds", got)
	}
	if p := e.Views().Site("www").Origins["a1"].Partitions; len(p) != 0 {
		t.Fatalf("ended, still shown: %+v", p)
	}
}

func TestPathPartitionOff(t *testing.T) {
	ctx := context.Background()
	e, pod := startPod(t, `
source "node" { plugin = "vigil-source-node" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`)
	pod.set("eu-1", "a1", true)
	for range 5 {
		e.RunRound(ctx)
	}
	if got := partitionEvents(t, e); len(got) != 0 {
		t.Fatalf("without the partition block: %v", got)
	}
	pod.mu.Lock()
	defer pod.mu.Unlock()
	if pod.status != 0 {
		t.Fatalf("the status was asked %d times with the feature off", pod.status)
	}
}
