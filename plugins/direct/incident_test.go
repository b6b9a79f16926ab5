package direct_test

import (
	"context"
	"fmt"
	"github.com/vigilcdn/vigil/sdk/sdktest"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/direct"
	"github.com/vigilcdn/vigil/sdk"
)

// TestBlackHolesAllGetVerdicts: a ballot of black-holed origins gets a
// verdict for every target in one round: down by a timeout, none cut.
// How long the round takes (about one probe timeout, plus the spread) is
// BenchmarkBlackHoles's figure: a loaded machine must not fail this test.
func TestBlackHolesAllGetVerdicts(t *testing.T) {
	const targets = 300
	addr := sdktest.BlackHole(t)
	ballot := sdk.Ballot{}
	for i := range targets {
		tg := target(fmt.Sprint("o", i), addr)
		tg.Timeout = 500 * time.Millisecond
		ballot.Targets = append(ballot.Targets, tg)
	}
	src := direct.New(nil)
	if err := src.Configure(context.Background(), sdk.Config{}); err != nil {
		t.Fatal(err)
	}
	// A round's deadline far above its need: the test is about the
	// verdicts, and a loaded machine must still give them all.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	votes, err := src.Vote(ctx, ballot)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(votes) != targets {
		t.Fatalf("%d votes for %d targets", len(votes), targets)
	}
	for _, v := range votes {
		if v.Value != sdk.Down || v.Reason != sdk.ReasonTimeout {
			t.Fatalf("vote %+v, want down: timeout", v)
		}
	}
	t.Logf("%d black-holed targets took %v with a 500ms timeout (BenchmarkBlackHoles measures it)", targets, took.Round(time.Millisecond))
}

// TestCutTargetsRotate: when a round cannot probe everything, the targets
// it leaves out differ from round to round, so every one gets probed.
func TestCutTargetsRotate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond) // every probe takes a while
	}))
	t.Cleanup(srv.Close)
	src := direct.New(nil)
	if err := src.Configure(context.Background(), sdk.Config{Values: map[string]any{"concurrency": 1.0, "spread": 0.05}}); err != nil {
		t.Fatal(err)
	}
	ballot := sdk.Ballot{}
	for i := range 10 {
		tg := target(fmt.Sprint("o", i), srv.URL)
		tg.Timeout = time.Second
		ballot.Targets = append(ballot.Targets, tg)
	}
	probed := map[string]int{}
	for round := range 12 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		votes, err := src.Vote(ctx, ballot)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		cut := 0
		for _, v := range votes {
			switch {
			case v.Value == sdk.Up:
				probed[v.Origin]++
			case v.Value == sdk.Abstain && v.Reason == sdk.ReasonOutOfTime:
				cut++
			default:
				t.Fatalf("round %d: vote %+v", round, v)
			}
		}
		if cut == 0 {
			t.Fatalf("round %d cut nothing; the test needs a round too short for its ballot", round)
		}
	}
	if len(probed) != 10 {
		t.Fatalf("after 12 rounds only %d of 10 targets were ever probed: %v", len(probed), probed)
	}
}

// TestStartsAreSpread: the probes of a round do not all start at once.
// A round of 20s with spread 0.05 spreads the 40 starts over about 0.95s
// (5% of the 19s before the source's answer margin): probe k waits until
// k/40 of it. A timer never fires early, so the i-th earliest arrival is at
// least i/40 of the spread after the call: the test asserts that lower
// bound (at 0.8s, room for a start delayed by 3s), which a loaded machine
// can only help, and no upper bound at all.
func TestStartsAreSpread(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	src := direct.New(nil)
	if err := src.Configure(context.Background(), sdk.Config{Values: map[string]any{"spread": 0.05}}); err != nil {
		t.Fatal(err)
	}
	const targets = 40
	ballot := sdk.Ballot{}
	for i := range targets {
		tg := target(fmt.Sprint("o", i), srv.URL)
		tg.Timeout = time.Second
		ballot.Targets = append(ballot.Targets, tg)
	}
	before := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	votes, err := src.Vote(ctx, ballot)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range votes {
		if v.Value != sdk.Up {
			t.Fatalf("vote %+v, want up: the round has time for every probe", v)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != targets {
		t.Fatalf("%d probes arrived, want %d", len(arrivals), targets)
	}
	slices.SortFunc(arrivals, time.Time.Compare)
	const minSpread = 800 * time.Millisecond
	for i, a := range arrivals {
		if at, least := a.Sub(before), minSpread*time.Duration(i)/targets; at < least {
			t.Fatalf("start %d of %d came %v after the call, want at least %v: the starts are not spread", i+1, targets, at, least)
		}
	}
}

// TestNoTargetCutTwiceInARow: the targets a round ran out of time for are
// probed first in the next one.
func TestNoTargetCutTwiceInARow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(srv.Close)
	src := direct.New(nil)
	if err := src.Configure(context.Background(), sdk.Config{Values: map[string]any{"concurrency": 1.0, "spread": 0.05}}); err != nil {
		t.Fatal(err)
	}
	ballot := sdk.Ballot{}
	for i := range 10 {
		tg := target(fmt.Sprint("o", i), srv.URL)
		tg.Timeout = time.Second
		ballot.Targets = append(ballot.Targets, tg)
	}
	var lastCut map[string]bool
	for round := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		votes, err := src.Vote(ctx, ballot)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		cut := map[string]bool{}
		for _, v := range votes {
			if v.Value == sdk.Abstain {
				cut[v.Origin] = true
			}
		}
		probed := len(votes) - len(cut)
		for o := range cut {
			if lastCut[o] && probed >= len(lastCut) {
				t.Fatalf("round %d cut %s again although %d targets were probed and %d were cut the round before", round, o, probed, len(lastCut))
			}
		}
		lastCut = cut
	}
}
