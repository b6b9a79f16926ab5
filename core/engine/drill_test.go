package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

const drillConfig = `
control {
  round_interval = "30s"
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
site "off" {
  hostname = "off.example.com"
  health_check { enabled = false }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

// drillRig is an engine on a bbolt store with a fake direct source and a
// hand-turned clock: each round is round_interval later. No wall clock.
type drillRig struct {
	t   *testing.T
	dir string
	now time.Time
	src enginetest.Sources
	e   *engine.Engine
	st  store.Store
}

func newDrillRig(t *testing.T, cfg string) *drillRig {
	r := &drillRig{t: t, dir: t.TempDir(), now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), src: enginetest.Sources{}}
	r.start(cfg)
	t.Cleanup(r.stop)
	return r
}

func (r *drillRig) start(cfg string) {
	r.t.Helper()
	st, err := store.Open(r.dir, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	e, diags := engine.New(context.Background(), enginetest.Config(r.t, cfg), engine.Options{Store: st, NewSource: r.src.Factory(), Now: func() time.Time { return r.now }})
	if diags.HasErrors() {
		st.Close()
		r.t.Fatal(diags.Error())
	}
	r.e, r.st = e, st
}

func (r *drillRig) stop() {
	if r.e != nil {
		r.e.Close()
		r.st.Close()
		r.e = nil
	}
}

func (r *drillRig) rounds(n int) {
	r.t.Helper()
	for range n {
		r.now = r.now.Add(30 * time.Second)
		if res := r.e.RunRound(context.Background()); !res.Saved {
			r.t.Fatalf("round %d not saved", res.Round)
		}
	}
}

func (r *drillRig) level() int { return r.e.Views().Site("www").Level }

// journal is the site's journal, one line per event: "kind detail
// [drill] actor".
func (r *drillRig) journal(site string) []store.Event {
	r.t.Helper()
	evs, err := r.e.Events(context.Background(), 0, site, 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	return evs
}

func kinds(evs []store.Event, keep func(decide.Event) bool) []string {
	var out []string
	for _, e := range evs {
		if keep != nil && !keep(e.Event) {
			continue
		}
		s := e.Event.String()
		if e.Event.Drill {
			s += " [drill]"
		}
		if e.Actor != "" {
			s += " by " + e.Actor
		}
		out = append(out, s)
	}
	return out
}

// notOrigin keeps the site-level events this test looks at: the drill's
// own, the switches and the level alarms.
func notOrigin(e decide.Event) bool {
	switch e.Kind {
	case decide.KindDrillStarted, decide.KindDrillEnded, decide.KindLevelSwitched, decide.KindAllLevelsUnhealthy, decide.KindFailbackAvailable:
		return true
	}
	return false
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got:\n  %s\n want:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestDrillFailoverAndReturn: a drill of level 1 fails the site over after
// unhealthy_threshold rounds through the real decisions, the real votes
// stay on record beside the drill's (not counted), the drill ends when its
// time is up, and auto failback brings the site back; every event between
// is marked as the drill's, and the drill is forgotten once back.
func TestDrillFailoverAndReturn(t *testing.T) {
	r := newDrillRig(t, drillConfig)
	ctx := context.Background()
	r.rounds(2) // every origin healthy
	d, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{For: 3 * time.Minute}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if d.Level != 1 || d.FromLevel != 1 || !d.Running || strings.Join(d.Origins, ",") != "a1,a2" || d.Actor != "alice" {
		t.Fatalf("drill %+v", d)
	}
	r.rounds(2)
	if r.level() != 1 {
		t.Fatalf("level %d after 2 drill rounds, want 1 (unhealthy_threshold is 3)", r.level())
	}
	r.rounds(1)
	if r.level() != 2 {
		t.Fatalf("level %d after 3 drill rounds, want 2", r.level())
	}
	v := r.e.Views().Site("www")
	a1 := v.Origins["a1"]
	if a1.By == nil || *a1.By != api.DrillSource || a1.Verdict != "down" {
		t.Fatalf("a1 verdict %s by %v, want down by drill", a1.Verdict, a1.By)
	}
	var sawReal, sawDrill bool
	for _, vote := range a1.Votes {
		sawReal = sawReal || (vote.Source == "direct" && vote.Value == "up")
		sawDrill = sawDrill || (vote.Source == api.DrillSource && vote.Value == "down")
	}
	if !sawReal || !sawDrill {
		t.Errorf("a1's votes %+v: want the real direct up vote kept beside the drill's down", a1.Votes)
	}
	if got, err := r.e.Views().Drill("www"); err != nil || !got.Running {
		t.Fatalf("Drill during the drill: %+v, %v", got, err)
	}
	r.rounds(2) // 9:03:30, before the drill's end at 9:04:00
	if r.level() != 2 {
		t.Fatalf("level %d while the drill runs, want 2", r.level())
	}
	r.rounds(1) // 9:04:00: the drill ends; the origins get their real up votes
	if d, err := r.e.Views().Drill("www"); err != nil || d.Running || d.End != decide.DrillEndTime {
		t.Fatalf("after its time: %+v, %v; want ended, time_up, still shown", d, err)
	}
	r.rounds(1) // healthy_threshold 2: healthy now, failback
	if r.level() != 1 {
		t.Fatalf("level %d after the drill, want 1 (auto failback)", r.level())
	}
	if _, err := r.e.Views().Drill("www"); !errors.Is(err, engine.ErrNoDrill) {
		t.Errorf("Drill once back: %v, want ErrNoDrill", err)
	}
	sameLines(t, "journal", kinds(r.journal("www"), notOrigin), []string{
		"drill of level 1 started for 180s by alice",
		"level 1 -> 2 (failover) [drill]",
		"drill of level 1 ended (time_up)",
		"level 2 -> 1 (failback) [drill]",
	})
	// A round after the return marks nothing as the drill's.
	r.src["direct"].SetDown("www", "b1", true)
	r.rounds(3)
	for _, e := range r.journal("www") {
		if e.Event.Kind == decide.KindOriginState && e.Event.Origin == "b1" && e.Event.To == decide.Unhealthy && e.Event.Drill {
			t.Errorf("b1's real failure after the drill is marked as the drill's: %+v", e)
		}
	}
}

// TestDrillAbort: an abort ends the drill at once; the failback follows.
func TestDrillAbort(t *testing.T) {
	r := newDrillRig(t, drillConfig)
	ctx := context.Background()
	r.rounds(2)
	if _, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{For: time.Hour}, "bob"); err != nil {
		t.Fatal(err)
	}
	r.rounds(3)
	if r.level() != 2 {
		t.Fatalf("level %d, want 2", r.level())
	}
	d, err := r.e.AbortDrill(ctx, "www", "carol")
	if err != nil || d.Running || d.End != decide.DrillEndAborted {
		t.Fatalf("abort: %+v, %v", d, err)
	}
	if _, err := r.e.AbortDrill(ctx, "www", "carol"); !hasCode(err, "no_drill") {
		t.Errorf("a second abort: %v, want no_drill", err)
	}
	r.rounds(2)
	if r.level() != 1 {
		t.Fatalf("level %d two rounds after the abort, want 1", r.level())
	}
	sameLines(t, "journal", kinds(r.journal("www"), notOrigin), []string{
		"drill of level 1 started for 3600s by bob",
		"level 1 -> 2 (failover) [drill]",
		"drill of level 1 ended (aborted) by carol",
		"level 2 -> 1 (failback) [drill]",
	})
}

// TestDrillStepsAside: when the level the drill failed over to really
// fails, the drill ends (stepped_aside); from then on the events are real
// ones, and level 1 comes back by the real votes.
func TestDrillStepsAside(t *testing.T) {
	r := newDrillRig(t, drillConfig)
	ctx := context.Background()
	r.rounds(2)
	if _, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{For: time.Hour}, "alice"); err != nil {
		t.Fatal(err)
	}
	r.rounds(3)
	r.src["direct"].SetDown("www", "b1", true)
	r.rounds(3) // b1 unhealthy: level 2 really failed
	d, err := r.e.Views().Drill("www")
	if !errors.Is(err, engine.ErrNoDrill) {
		t.Fatalf("after the real failure: %+v, %v; want the drill gone", d, err)
	}
	r.rounds(2) // level 1's real votes: healthy again
	if r.level() != 1 {
		t.Fatalf("level %d, want 1", r.level())
	}
	sameLines(t, "journal", kinds(r.journal("www"), notOrigin), []string{
		"drill of level 1 started for 3600s by alice",
		"level 1 -> 2 (failover) [drill]",
		"all levels unhealthy; staying on level 2 [drill]",
		"drill of level 1 ended (stepped_aside)",
		"level 2 -> 1 (failback)",
	})
}

// TestDrillSurvivesRestart: the drill is kept with the site's record: a
// new engine on the same store goes on with it and ends it on time.
func TestDrillSurvivesRestart(t *testing.T) {
	r := newDrillRig(t, drillConfig)
	ctx := context.Background()
	r.rounds(2)
	if _, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{For: 2 * time.Minute}, "alice"); err != nil {
		t.Fatal(err)
	}
	r.rounds(1)
	r.stop()
	r.start(drillConfig)
	d, err := r.e.Views().Drill("www")
	if err != nil || !d.Running || d.Actor != "alice" || !d.Until.Equal(time.Date(2026, 12, 2, 9, 3, 0, 0, time.UTC)) {
		t.Fatalf("after the restart: %+v, %v", d, err)
	}
	r.rounds(2) // 9:02:00, 9:02:30: the third down verdict
	if r.level() != 2 {
		t.Fatalf("level %d, want 2: the drill's rounds went on after the restart", r.level())
	}
	r.rounds(2) // 9:03:00: time up; 9:03:30: level 1 healthy again
	if r.level() != 1 {
		t.Fatalf("level %d, want 1", r.level())
	}
	sameLines(t, "journal", kinds(r.journal("www"), notOrigin), []string{
		"drill of level 1 started for 120s by alice",
		"level 1 -> 2 (failover) [drill]",
		"drill of level 1 ended (time_up)",
		"level 2 -> 1 (failback) [drill]",
	})
}

func hasCode(err error, code string) bool {
	var ae *engine.ActionError
	return errors.As(err, &ae) && ae.Code == code
}

// TestDrillRefusals: each refusal names the problem and the way out, and
// changes nothing.
func TestDrillRefusals(t *testing.T) {
	r := newDrillRig(t, drillConfig)
	ctx := context.Background()
	// Before any round no level is known healthy.
	if _, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{}, "alice"); !hasCode(err, "no_healthy_level") ||
		!strings.Contains(err.Error(), "no healthy level besides level 1 to fail over to") {
		t.Fatalf("before any round: %v", err)
	}
	r.rounds(2)
	for _, c := range []struct {
		name, site string
		req        engine.DrillRequest
		setup      func()
		code, msg  string
	}{
		{name: "unknown site", site: "nope", code: "unknown_site", msg: "no site nope"},
		{name: "unknown level", site: "www", req: engine.DrillRequest{Level: 7}, code: "unknown_level", msg: "site www has no level 7 (its levels are 1, 2)"},
		{name: "negative duration", site: "www", req: engine.DrillRequest{For: -time.Second}, code: "bad_duration", msg: "the duration must be more than 0 and at most 24h0m0s"},
		{name: "too long", site: "www", req: engine.DrillRequest{For: 25 * time.Hour}, code: "bad_duration", msg: "at most 24h0m0s"},
		{name: "paused", site: "off", code: "site_paused", msg: "its health checks are paused (its health check is disabled)"},
		{name: "manual hold", site: "www", setup: func() {
			if _, err := r.e.Switch(ctx, "www", 1, "ops"); err != nil { // the top level: no hold
				t.Fatal(err)
			}
			if _, err := r.e.Switch(ctx, "www", 2, "ops"); err != nil {
				t.Fatal(err)
			}
		}, code: "manual_hold", msg: "site www is held on level 2 by a manual switch"},
		{name: "running", site: "www", setup: func() {
			if _, err := r.e.Switch(ctx, "www", 1, "ops"); err != nil {
				t.Fatal(err)
			}
			if _, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{}, "alice"); err != nil {
				t.Fatal(err)
			}
		}, code: "drill_running", msg: "a drill of level 1 is already running, started by alice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup()
			}
			before := len(r.journal(""))
			_, err := r.e.StartDrill(ctx, c.site, c.req, "bob")
			if !hasCode(err, c.code) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want code %s saying %q", err, c.code, c.msg)
			}
			var ae *engine.ActionError
			if errors.As(err, &ae) && ae.Code != "unknown_site" && ae.Hint == "" {
				t.Errorf("no hint: the refusal must say the way out")
			}
			if after := len(r.journal("")); after != before {
				t.Errorf("the refusal journaled %d events", after-before)
			}
		})
	}
}

// TestDrillOtherLevel: a drill of a level the site is not on fails
// nothing over, and ends with the site where it was.
func TestDrillOtherLevel(t *testing.T) {
	r := newDrillRig(t, drillConfig)
	ctx := context.Background()
	r.rounds(2)
	if _, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{Level: 2, For: 2 * time.Minute}, "alice"); err != nil {
		t.Fatal(err)
	}
	r.rounds(4)
	if r.level() != 1 {
		t.Fatalf("level %d, want 1", r.level())
	}
	got := kinds(r.journal("www"), func(e decide.Event) bool { return notOrigin(e) || e.Kind == decide.KindOriginState })
	want := []string{
		"drill of level 2 started for 120s by alice",
		"origin b1: healthy -> unhealthy [drill]",
		"drill of level 2 ended (time_up)",
	}
	if len(got) < 3 {
		t.Fatalf("journal %q", got)
	}
	sameLines(t, "journal", got[len(got)-3:], want)
}

// hookSource is the fake direct source with a hook called inside Vote,
// while the engine's round has let go of its lock.
type hookSource struct {
	*enginetest.Source
	onVote func()
}

func (h *hookSource) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	if f := h.onVote; f != nil {
		h.onVote = nil
		f()
	}
	return h.Source.Vote(ctx, b)
}

// TestDrillStartedDuringARound: a drill that starts while a round's
// sources vote is not counted by that round (it started before the
// drill), only from the next one on.
func TestDrillStartedDuringARound(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	src := &hookSource{Source: enginetest.NewSource("direct")}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e, diags := engine.New(ctx, enginetest.Config(t, drillConfig), engine.Options{Store: st, Now: func() time.Time { return now },
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
	if diags.HasErrors() {
		st.Close()
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	round := func() {
		now = now.Add(30 * time.Second)
		e.RunRound(ctx)
	}
	round()
	round()
	var started error
	src.onVote = func() {
		now = now.Add(time.Second) // the drill starts a second into the round
		_, started = e.StartDrill(ctx, "www", engine.DrillRequest{For: time.Hour}, "alice")
	}
	round()
	if started != nil {
		t.Fatal(started)
	}
	a1 := e.Views().Site("www").Origins["a1"]
	if a1.By == nil || *a1.By != "direct" || a1.Verdict != "up" {
		t.Fatalf("the round the drill started in: a1 %s by %v, want up by direct", a1.Verdict, a1.By)
	}
	round()
	a1 = e.Views().Site("www").Origins["a1"]
	if a1.By == nil || *a1.By != api.DrillSource || a1.Verdict != "down" {
		t.Fatalf("the next round: a1 %s by %v, want down by drill", a1.Verdict, a1.By)
	}
}

// TestDrillWayBackRealFailure: after the drill, a real down verdict of the
// drilled level ends its way back: what follows is a real outage, not
// marked as the drill's.
func TestDrillWayBackRealFailure(t *testing.T) {
	r := newDrillRig(t, drillConfig)
	ctx := context.Background()
	r.rounds(2)
	if _, err := r.e.StartDrill(ctx, "www", engine.DrillRequest{For: time.Hour}, "alice"); err != nil {
		t.Fatal(err)
	}
	r.rounds(3)
	r.src["direct"].SetDown("www", "a1", true)
	r.src["direct"].SetDown("www", "a2", true)
	if _, err := r.e.AbortDrill(ctx, "www", "alice"); err != nil {
		t.Fatal(err)
	}
	r.rounds(1)
	if _, err := r.e.Views().Drill("www"); !errors.Is(err, engine.ErrNoDrill) {
		t.Fatalf("after a real down verdict of level 1: %v, want the drill gone", err)
	}
	r.src["direct"].SetDown("www", "b1", true)
	r.rounds(3)
	sameLines(t, "journal", kinds(r.journal("www"), notOrigin), []string{
		"drill of level 1 started for 3600s by alice",
		"level 1 -> 2 (failover) [drill]",
		"drill of level 1 ended (aborted) by alice",
		"all levels unhealthy; staying on level 2",
	})
}
