package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// perSiteSource is a fake source whose Vote call takes perSite for each
// site of the ballot on the fake clock: a round's time grows with its
// sites, as a real source's does past its concurrency.
type perSiteSource struct {
	*enginetest.Source
	clock *fakeClock
	mu    sync.Mutex
	per   time.Duration
}

func (s *perSiteSource) setPerSite(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.per = d
}

func (s *perSiteSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	sites := map[string]bool{}
	for _, t := range b.Targets {
		sites[t.Site] = true
	}
	s.mu.Lock()
	per := s.per
	s.mu.Unlock()
	s.clock.advance(per * time.Duration(len(sites)))
	return s.Source.Vote(ctx, b)
}

// autoFleet is a configuration of n sites of two origins with
// sites_per_round = "auto" and a 30 s round (a 28 s budget).
func autoFleet(n int) string {
	var b strings.Builder
	b.WriteString("control {\n  round_interval = \"30s\"\n  sites_per_round = \"auto\"\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := range n {
		fmt.Fprintf(&b, "site \"s%05d\" {\n  hostname = \"s%05d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" { address = \"http://127.0.0.1:2\" }\n}\n", i, i)
	}
	return b.String()
}

// autoEngine starts an engine of cfg whose one source takes perSite a site
// on a fake clock, its metrics in reg.
func autoEngine(t *testing.T, cfg string, owns func(string) bool) (*engine.Engine, *perSiteSource, *prometheus.Registry) {
	t.Helper()
	return autoEngineActive(t, cfg, owns, nil)
}

// autoEngineActive is autoEngine with Options.Active.
func autoEngineActive(t *testing.T, cfg string, owns func(string) bool, active func() bool) (*engine.Engine, *perSiteSource, *prometheus.Registry) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)}
	src := &perSiteSource{Source: enginetest.NewSource("direct"), clock: clock}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, diags := engine.New(context.Background(), enginetest.Config(t, cfg), engine.Options{Store: st, Registerer: reg, Now: clock.Now, Owns: owns, Active: active,
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
	if diags.HasErrors() {
		st.Close()
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	return e, src, reg
}

// gauge reads a gauge without labels from reg (-1 when it is missing).
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestAutoRoundSizeInTheEngine: with sites_per_round = "auto" the engine
// sizes each round by AutoRoundSize from the rounds it timed on its clock:
// it starts at 500, doubles while the rounds are fast, stops at what fits
// 3/4 of the 28 s budget, drops back at once when a slow spell (a
// black-hole storm) makes a round late, and grows again after it. Each
// round's size shows in vigil_round_sites_limit.
func TestAutoRoundSizeInTheEngine(t *testing.T) {
	e, src, reg := autoEngine(t, autoFleet(3000), nil)
	ms := time.Millisecond
	steps := []struct {
		perSite time.Duration
		want    int
		why     string
	}{
		{10 * ms, 500, "no round yet: the floor"},
		{10 * ms, 1000, "500 in 5 s: twice the last round"},
		{10 * ms, 2000, "1,500 in 15 s: twice the last round"},
		{10 * ms, 2100, "3,500 in 35 s: 3/4 of the 2,800 that fit"},
		{50 * ms, 2100, "the storm starts: this round is sized before it"},
		{50 * ms, 500, "2,100 in 105 s, late: 3/4 of 560, the floor"},
		{50 * ms, 893, "7,700 in 181 s over the last five: 3/4 of 1,191"},
		{10 * ms, 500, "893 in 44.65 s, late: the floor again"},
		{10 * ms, 637, "6,093 in 200.65 s over the last five: 3/4 of 850"},
	}
	for i, s := range steps {
		src.setPerSite(s.perSite)
		res := e.RunRound(context.Background())
		if res.Probed != s.want {
			t.Fatalf("round %d (%s): probed %d sites, want %d", i+1, s.why, res.Probed, s.want)
		}
		if g := gauge(t, reg, "vigil_round_sites_limit"); g != float64(s.want) {
			t.Fatalf("round %d: vigil_round_sites_limit %v, want %d", i+1, g, s.want)
		}
	}
}

// TestAutoRoundSizeShare: in sharded mode an instance sizes its rounds
// from its own share: 1,600 sites of which it owns 800 are one round of
// 500, then every owned site each round; a number keeps its fixed size.
func TestAutoRoundSizeShare(t *testing.T) {
	owns := func(site string) bool {
		n, _ := strconv.Atoi(strings.TrimPrefix(site, "s"))
		return n%2 == 0
	}
	for _, tt := range []struct {
		name string
		cfg  string
		want []int
	}{
		{"auto", autoFleet(1600), []int{500, 800, 800}},
		{"a number", strings.Replace(autoFleet(1600), `"auto"`, "300", 1), []int{300, 300, 300}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, src, reg := autoEngine(t, tt.cfg, owns)
			src.setPerSite(10 * time.Millisecond)
			for i, want := range tt.want {
				if res := e.RunRound(context.Background()); res.Probed != want {
					t.Fatalf("round %d: probed %d sites, want %d", i+1, res.Probed, want)
				}
				if g := gauge(t, reg, "vigil_round_sites_limit"); g != float64(want) {
					t.Fatalf("round %d: vigil_round_sites_limit %v, want %d", i+1, g, want)
				}
			}
		})
	}
}

// TestAutoRoundSizeStandby: an instance that goes standby forgets the
// rounds it timed, and starts again from 500 once active: another
// instance's rounds came between.
func TestAutoRoundSizeStandby(t *testing.T) {
	var mu sync.Mutex
	active := true
	setActive := func(v bool) {
		mu.Lock()
		defer mu.Unlock()
		active = v
	}
	e, src, _ := autoEngineActive(t, autoFleet(3000), nil, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return active
	})
	src.setPerSite(10 * time.Millisecond)
	for i, step := range []struct {
		active bool
		want   int // sites probed; 0: the round is skipped
	}{
		{true, 500}, {true, 1000}, {true, 2000},
		{false, 0},
		{true, 500}, {true, 1000},
	} {
		setActive(step.active)
		if res := e.RunRound(context.Background()); res.Probed != step.want {
			t.Fatalf("round %d (active %v): probed %d sites, want %d", i+1, step.active, res.Probed, step.want)
		}
	}
}
