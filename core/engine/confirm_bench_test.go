package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// deathSource votes up for every origin but each site's primary "a" from
// its death on (the fake clock's time of the ballot), and counts the
// targets it was asked about (the probe load).
type deathSource struct {
	now    func() time.Time
	deaths map[string]time.Time

	mu     sync.Mutex
	probes int
}

func (*deathSource) Name() string                          { return "direct" }
func (*deathSource) Start(context.Context) hcl.Diagnostics { return nil }
func (*deathSource) Close()                                {}
func (d *deathSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	now := d.now()
	out := make([]sdk.Vote, 0, len(b.Targets))
	for _, t := range b.Targets {
		v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: "direct", Value: sdk.Up, Reason: sdk.ReasonOK}
		if at, ok := d.deaths[t.Site]; ok && t.Origin == "a" && !now.Before(at) {
			v.Value, v.Reason = sdk.Down, sdk.ReasonConnectFailed
		}
		out = append(out, v)
	}
	d.mu.Lock()
	d.probes += len(b.Targets)
	d.mu.Unlock()
	return out, nil
}

// BenchmarkTimeToFailover measures, on a fake clock, the time from the
// death of a site's primary to the site on level 2, over 1,000 sites
// (round_interval 30s, unhealthy_threshold 3, every site probed each
// round), without and with confirm_interval = "3s", and the probe load of
// both (targets asked per minute, over the whole run). The engine is the
// real one (its rounds, confirmation rounds and their scheduling,
// nextConfirm, as Run uses them); only the clock is driven by the
// benchmark, each round taking no time, as Run would with instant
// sources.
//
//   - spread: the primaries die at random times over 100 round intervals
//     (about 10 a round interval): confirmations never run out of budget;
//   - incident: every primary dies at a random time within one round
//     interval: 1,000 sites in doubt at once, more than confirm_budget
//     (10 per cent of sites_per_round: 100 a confirmation round) lets
//     through.
//
// Reported: p50_s and max_s (seconds from death to level 2),
// probes/min (the whole run) and, for the incident, deferred (sites left
// out by a confirmation round for the budget, summed).
func BenchmarkTimeToFailover(b *testing.B) {
	for _, sc := range []struct {
		name   string
		sites  int
		cycles int // the deaths spread over this many round intervals
		budget int // confirm_budget, per cent (0: the default)
	}{
		{"spread", 1000, 100, 0}, {"incident", 1000, 1, 0},
		{"sites=100/incident", 100, 1, 0}, {"sites=100/incident/budget=100", 100, 1, 100},
		{"sites=10000/incident", 10000, 1, 0}, {"sites=10000/incident/budget=100", 10000, 1, 100},
	} {
		sites := sc.sites
		for _, confirm := range []string{"", "3s"} {
			name := sc.name + "/confirm=off"
			if confirm != "" {
				name = sc.name + "/confirm=" + confirm
			}
			b.Run(name, func(b *testing.B) {
				var r failoverRun
				for b.Loop() {
					r = runFailovers(b, sites, sc.cycles, sc.budget, confirm)
				}
				b.ReportMetric(r.p50.Seconds(), "p50_s")
				b.ReportMetric(r.max.Seconds(), "max_s")
				b.ReportMetric(r.probesPerMin, "probes/min")
				b.ReportMetric(r.deferred, "deferred")
			})
		}
	}
}

type failoverRun struct {
	p50, max     time.Duration
	probesPerMin float64
	deferred     float64
}

func runFailovers(b *testing.B, sites, cycles, budget int, confirm string) failoverRun {
	b.Helper()
	const interval = 30 * time.Second
	var sb strings.Builder
	budgetLine := ""
	if budget > 0 {
		budgetLine = fmt.Sprintf("  confirm_budget = %d\n", budget)
	}
	fmt.Fprintf(&sb, "control {\n  round_interval = \"30s\"\n  sites_per_round = %d\n%s}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", sites, budgetLine)
	hc := ""
	if confirm != "" {
		hc = fmt.Sprintf("health_check { confirm_interval = %q }", confirm)
	}
	for i := range sites {
		fmt.Fprintf(&sb, "site \"s%04d\" {\n  hostname = \"s%04d.example.com\"\n  %s\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i, hc)
	}
	cfg, diags := config.Parse("bench.hcl", []byte(sb.String()))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	rng := rand.New(rand.NewPCG(28, uint64(cycles)))
	src := &deathSource{now: clock, deaths: map[string]time.Time{}}
	first := t0.Add(2 * interval) // healthy by then
	span := time.Duration(cycles) * interval
	for i := range sites {
		src.deaths[fmt.Sprintf("s%04d", i)] = first.Add(time.Duration(rng.Int64N(int64(span))))
	}
	st, err := store.Open(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e, diags := New(context.Background(), cfg, Options{Store: st, Now: clock,
		NewSource: func(*config.Source, string, hclog.Logger) VoteSource { return src }})
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	defer e.Close()
	ctx := context.Background()

	switched := map[string]time.Duration{}
	note := func() {
		v := e.Views()
		for i := range v.Len() {
			name := v.Name(i)
			if _, ok := switched[name]; !ok && v.Level(i) == 2 {
				switched[name] = now.Sub(src.deaths[name])
			}
		}
	}
	// Run's schedule, each round taking no time: a round every interval,
	// and between them the confirmation rounds nextConfirm asks for.
	end := first.Add(span + 4*interval)
	next, last := t0, time.Time{}
	for {
		if wait, ok := e.nextConfirm(next, last); ok && now.Add(wait).Before(next) {
			if !now.Add(wait).Before(end) {
				break
			}
			now = now.Add(wait)
			last = now
			e.RunConfirm(ctx)
		} else {
			if !next.Before(end) {
				break
			}
			now = next
			e.RunRound(ctx)
			next = now.Add(interval)
		}
		note()
	}
	if len(switched) != sites {
		b.Fatalf("%d of %d sites failed over", len(switched), sites)
	}
	times := make([]time.Duration, 0, sites)
	for _, d := range switched {
		times = append(times, d)
	}
	slices.Sort(times)
	return failoverRun{
		p50: times[len(times)/2], max: times[len(times)-1],
		probesPerMin: float64(src.probes) / end.Sub(t0).Minutes(),
		deferred:     testutil.ToFloat64(e.metrics.confirmDeferred),
	}
}
