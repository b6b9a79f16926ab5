package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
)

// chainConfig builds sites × 3 origins (levels 1, 1, 2) with the shipped
// three-source chain.
func chainConfig(tb testing.TB, sites int) *config.Config {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`control { sites_per_round = ` + fmt.Sprint(sites) + ` }
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}
source "dnspup" {
  plugin    = "vigil-source-dnspup"
  min_votes = 2
  tally     = "carry"
}
source "direct" { plugin = "vigil-source-direct" }
`)
	for i := 0; i < sites; i++ {
		fmt.Fprintf(&b, `site "s%06d" {
  hostname = "s%06d.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
  origin "b1" {
    address = "http://127.0.0.1:3"
    level   = 2
  }
}
`, i, i)
	}
	cfg, diags := config.Parse("bench.hcl", []byte(b.String()))
	if diags.HasErrors() {
		tb.Fatal(diags.Error())
	}
	return cfg
}

// mixedSource makes every origin walk the chain: node always splits 1-1,
// dnspup adds one up for origins 0 and 1 (carry 2-1 settles up), and
// origin 2 is left to direct.
type mixedSource struct{ down bool }

func (m mixedSource) Ask(_ context.Context, source int, targets []vote.Target, votes []vote.Counts) {
	for i, t := range targets {
		switch source {
		case 0:
			votes[i] = vote.Counts{Up: 1, Down: 1}
		case 1:
			if t.Origin != 2 {
				if m.down {
					votes[i] = vote.Counts{Down: 1}
				} else {
					votes[i] = vote.Counts{Up: 1}
				}
			}
		case 2:
			votes[i] = vote.Counts{Up: 1}
		}
	}
}

func TestRoundWalksTheChain(t *testing.T) {
	f := fleet.New(chainConfig(t, 3))
	var reps []fleet.Report
	for i := 0; i < 2; i++ {
		reps = f.Round(context.Background(), mixedSource{})
	}
	if len(reps) != 3 {
		t.Fatalf("%d reports, want 3", len(reps))
	}
	s := reps[0].Site
	tests := []struct {
		origin int
		by     string
		asked  string
	}{
		{0, "dnspup", "node,dnspup"},
		{1, "dnspup", "node,dnspup"},
		{2, "direct", "node,dnspup,direct"},
	}
	for _, tt := range tests {
		out := s.Outcomes[tt.origin]
		if f.Chain[out.By].Name != tt.by || strings.Join(s.Asked(f.Chain, tt.origin), ",") != tt.asked {
			t.Errorf("origin %d settled by %s after %v", tt.origin, f.Chain[out.By].Name, s.Asked(f.Chain, tt.origin))
		}
		if s.State.Origins[tt.origin].State != decide.Healthy {
			t.Errorf("origin %d is %s after two up rounds", tt.origin, s.State.Origins[tt.origin].State)
		}
	}
	// The primaries fail: three rounds and the site fails over.
	for i := 0; i < 3; i++ {
		reps = f.Round(context.Background(), mixedSource{down: true})
	}
	if s.State.Level != 2 || len(reps[0].Events) == 0 {
		t.Fatalf("level %d after three down rounds (events %v), want 2", s.State.Level, reps[0].Events)
	}
}

func TestActionsByName(t *testing.T) {
	f := fleet.New(chainConfig(t, 1))
	tests := []struct {
		name    string
		do      func() ([]decide.Event, error)
		wantErr string
	}{
		{"unknown site", func() ([]decide.Event, error) { return f.Switch("nope", 1) }, "no site nope"},
		{"unknown level", func() ([]decide.Event, error) { return f.Switch("s000000", 9) }, "site s000000 has no level 9"},
		{"unknown origin", func() ([]decide.Event, error) { return f.Disable("s000000", "zz") }, "site s000000 has no origin zz"},
		{"disable", func() ([]decide.Event, error) { return f.Disable("s000000", "a1") }, ""},
		{"enable", func() ([]decide.Event, error) { return f.Enable("s000000", "a1") }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.do()
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// BenchmarkRound is one round of decisions (scheduler, chain tally, origin
// health, level health, switching) for 100,000 sites × 3 origins with a
// 3-source chain, in steady state.
func BenchmarkRound(b *testing.B) {
	const sites = 100_000
	f := fleet.New(chainConfig(b, sites))
	ctx := context.Background()
	for i := 0; i < 3; i++ { // reach steady state and size the buffers
		f.Round(ctx, mixedSource{})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.Round(ctx, mixedSource{})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(sites*3), "ns/origin")
}

// TestApplySkipsSitesNoLongerOwned: a site whose ownership moved away
// while the round's sources voted sits the round out: its new owner decides
// it from then on.
func TestApplySkipsSitesNoLongerOwned(t *testing.T) {
	f := fleet.New(chainConfig(t, 3))
	owned := map[string]bool{"s000000": true, "s000001": true, "s000002": true}
	f.Owns = func(site string) bool { return owned[site] }
	p := f.Plan()
	if len(p.Picked) != 3 {
		t.Fatalf("%d sites planned, want 3", len(p.Picked))
	}
	p.Walk(context.Background(), mixedSource{})
	owned["s000001"] = false // handed over meanwhile
	var got []string
	for _, r := range f.Apply(p) {
		got = append(got, r.Site.Spec.Name)
	}
	if strings.Join(got, ",") != "s000000,s000002" {
		t.Fatalf("applied %v, want the two sites still owned", got)
	}
	if s := f.Site("s000001"); s.LastProbed != 0 || s.State.Origins[0].Successes != 0 {
		t.Fatalf("the handed-over site was applied: last probed %d, %+v", s.LastProbed, s.State.Origins[0])
	}
}
