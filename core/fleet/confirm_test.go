package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/vote"
)

// confirmConfig builds n sites (c0, c1, ...) of two origins, a1 on level 1
// and b1 on level 2, one source, confirm_interval 3s on every site but
// those named in without.
func confirmConfig(t *testing.T, n, perRound, budget int, without ...string) *config.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "control {\n  sites_per_round = %d\n  confirm_budget = %d\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", perRound, budget)
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		hc := `health_check { confirm_interval = "3s" }`
		if slices.Contains(without, name) {
			hc = ""
		}
		fmt.Fprintf(&b, "site %q {\n  hostname = \"%s.example.com\"\n  %s\n  origin \"a1\" { address = \"http://127.0.0.1:1\" }\n  origin \"b1\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", name, name, hc)
	}
	cfg, diags := config.Parse("confirm.hcl", []byte(b.String()))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

// byKey answers every origin with one vote: down when its
// "site/origin" maps to down, else up.
type byKey struct {
	f *fleet.Fleet
	v map[string]vote.Verdict
}

func (s byKey) Ask(_ context.Context, _ int, targets []vote.Target, votes []vote.Counts) {
	for i, t := range targets {
		site := s.f.Sites[t.Site]
		if s.v[site.Spec.Name+"/"+site.Spec.Origins[t.Origin].Name] == vote.VerdictDown {
			votes[i] = vote.Counts{Down: 1}
		} else {
			votes[i] = vote.Counts{Up: 1}
		}
	}
}

func names(f *fleet.Fleet, idx []int) []string {
	out := []string{}
	for _, i := range idx {
		out = append(out, f.Sites[i].Spec.Name)
	}
	return out
}

// TestInDoubt: which last verdicts put a site in doubt.
func TestInDoubt(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		rounds []vote.Verdict // a1's verdicts, round after round (b1 always up)
		want   bool
	}{
		{"up while unknown is not in doubt", []vote.Verdict{vote.VerdictUp}, false},
		{"down while unknown", []vote.Verdict{vote.VerdictDown}, true},
		{"up while healthy", []vote.Verdict{vote.VerdictUp, vote.VerdictUp}, false},
		{"down while healthy", []vote.Verdict{vote.VerdictUp, vote.VerdictUp, vote.VerdictDown}, true},
		{"down twice while healthy", []vote.Verdict{vote.VerdictUp, vote.VerdictUp, vote.VerdictDown, vote.VerdictDown}, true},
		{"settled unhealthy", []vote.Verdict{vote.VerdictDown, vote.VerdictDown, vote.VerdictDown}, false},
		{"up while unhealthy", []vote.Verdict{vote.VerdictDown, vote.VerdictDown, vote.VerdictDown, vote.VerdictUp}, true},
		{"recovered", []vote.Verdict{vote.VerdictDown, vote.VerdictDown, vote.VerdictDown, vote.VerdictUp, vote.VerdictUp}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fleet.NewRoundClock(confirmConfig(t, 1, 10, 10))
			for _, v := range tt.rounds {
				f.Round(ctx, byKey{f, map[string]vote.Verdict{"c0/a1": v}})
			}
			if got := f.Sites[0].InDoubt(); got != tt.want {
				t.Fatalf("InDoubt = %v, want %v (a1 %s)", got, tt.want, f.Sites[0].State.Origins[0].State)
			}
			if got := len(f.Confirmable()) == 1; got != tt.want {
				t.Fatalf("Confirmable lists the site: %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConfirmPlan: a confirmation round takes the due sites in doubt, the
// most urgent first, at most its budget; the rest are deferred and come
// first next time; a site without confirm_interval is never taken; and a
// confirmation is a round with its own sequence number.
func TestConfirmPlan(t *testing.T) {
	ctx := context.Background()
	cfg := confirmConfig(t, 6, 10, 20, "c5") // 2 sites a confirmation
	f := fleet.NewRoundClock(cfg)
	down := map[string]vote.Verdict{}
	for i := range 6 {
		down[fmt.Sprintf("c%d/a1", i)] = vote.VerdictDown
	}
	f.Round(ctx, byKey{f, nil})
	f.Round(ctx, byKey{f, nil})
	if p, _ := f.ConfirmPlan(f.ConfirmSites, nil); p != nil {
		t.Fatalf("nothing in doubt, yet a confirmation of %v", names(f, p.Picked))
	}
	f.Round(ctx, byKey{f, down}) // round 3: every a1 down while healthy

	steps := []struct {
		due      func(int) bool
		picked   []string
		deferred []string
	}{
		{nil, []string{"c0", "c1"}, []string{"c2", "c3", "c4"}},
		{nil, []string{"c2", "c3"}, []string{"c4", "c0", "c1"}},
		// only c1 due (the others were probed too recently, say)
		{func(i int) bool { return f.Sites[i].Spec.Name == "c1" }, []string{"c1"}, nil},
		// c1 had its third down: unhealthy, no longer in doubt
		{nil, []string{"c0", "c4"}, []string{"c2", "c3"}},
	}
	for k, st := range steps {
		p, deferred := f.ConfirmPlan(f.ConfirmSites, st.due)
		if p == nil || !p.Confirm || p.All {
			t.Fatalf("step %d: plan %+v", k, p)
		}
		if got := names(f, p.Picked); !slices.Equal(got, st.picked) {
			t.Fatalf("step %d: picked %v, want %v", k, got, st.picked)
		}
		if got := names(f, f.Deferred()); !slices.Equal(got, st.deferred) || deferred != len(st.deferred) {
			t.Fatalf("step %d: deferred %v (%d), want %v", k, got, deferred, st.deferred)
		}
		p.Walk(ctx, byKey{f, down})
		if reps := f.Apply(p); len(reps) != len(st.picked) {
			t.Fatalf("step %d: %d reports", k, len(reps))
		}
	}
	if f.Seq != 7 {
		t.Fatalf("Seq = %d, want 7: a confirmation is a round with its own sequence number", f.Seq)
	}
	if c0 := f.Site("c0"); c0.State.Level != 2 {
		t.Fatalf("c0: three downs (round 3 and two confirmations) should have failed it over; level %d", c0.State.Level)
	}
	if c5 := f.Site("c5"); c5.LastProbed != 3 {
		t.Fatalf("c5 has no confirm_interval: probed at %d, want 3", c5.LastProbed)
	}
}

// TestSuspect: a suspicion makes a site due a confirmation although its
// verdicts are not in doubt, once; it is refused for a site without
// confirm_interval, an unknown site and a paused one.
func TestSuspect(t *testing.T) {
	ctx := context.Background()
	f := fleet.NewRoundClock(confirmConfig(t, 3, 10, 100, "c2"))
	f.Round(ctx, byKey{f, nil})
	f.Round(ctx, byKey{f, nil})
	for _, tt := range []struct {
		site string
		want bool
	}{{"c0", true}, {"c2", false}, {"nosuch", false}} {
		if got := f.Suspect(tt.site); got != tt.want {
			t.Errorf("Suspect(%s) = %v, want %v", tt.site, got, tt.want)
		}
	}
	if _, err := f.Disable("c1", "a1"); err != nil {
		t.Fatal(err)
	}
	if f.Suspect("c1") {
		t.Error("Suspect of a paused site (one enabled origin) accepted")
	}
	if !f.Site("c0").Suspected() {
		t.Fatal("c0 not suspected")
	}
	reps, _ := f.Confirm(ctx, byKey{f, nil})
	if got := len(reps); got != 1 || reps[0].Site.Spec.Name != "c0" {
		t.Fatalf("confirmation probed %d sites, want c0 alone", got)
	}
	if f.Site("c0").Suspected() {
		t.Fatal("c0 still suspected after its confirmation")
	}
	if reps, _ := f.Confirm(ctx, byKey{f, nil}); reps != nil {
		t.Fatalf("a served suspicion of a settled site asked again: %d reports", len(reps))
	}
}
