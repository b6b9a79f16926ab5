package engine_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
)

// hiddenConfig is a site with a failback setting put in by each case.
const hiddenConfig = `
control {
  round_interval = "30s"
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  FAILBACK
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
    HEALTH
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

// hiddenRig is an engine on a test clock, with level 1 failed and back:
// each round moves the clock 30 s.
type hiddenRig struct {
	t   *testing.T
	e   *engine.Engine
	st  store.Store
	src enginetest.Sources
	now time.Time
}

func newHiddenRig(t *testing.T, failback, health string) *hiddenRig {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &hiddenRig{t: t, st: st, src: enginetest.Sources{}, now: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	cfg := strings.NewReplacer("FAILBACK", failback, "HEALTH", health).Replace(hiddenConfig)
	e, diags := engine.New(ctx, enginetest.Config(t, cfg), engine.Options{Store: st, NewSource: r.src.Factory(), Now: func() time.Time { return r.now }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r.e = e
	r.round()
	r.src["direct"].SetDown("www", "a1", true)
	r.src["direct"].SetDown("www", "a2", true)
	r.round()
	if v := r.view(); v.Level != 2 || v.Waiting != nil {
		t.Fatalf("after the failover: level %d, waiting %+v", v.Level, v.Waiting)
	}
	r.src["direct"].SetDown("www", "a1", false)
	r.src["direct"].SetDown("www", "a2", false)
	return r
}

func (r *hiddenRig) round() {
	r.now = r.now.Add(30 * time.Second)
	r.e.RunRound(context.Background())
}

func (r *hiddenRig) view() *api.SiteView { return r.e.Views().Site("www") }

// journal is the site's journal lines of one kind, in their one-line form.
func (r *hiddenRig) journal(kind decide.EventKind) []string {
	r.t.Helper()
	evs, err := r.st.Events(context.Background(), 0, "www", 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if ev.Event.Kind == kind {
			out = append(out, ev.Event.String())
		}
	}
	return out
}

// TestHiddenStatesInTheView: a failback waiting out its dwell, one
// waiting for an operator, and a ramp's steps show in the site view, and
// the ramp's steps in the journal (issue 33, no hidden states).
func TestHiddenStatesInTheView(t *testing.T) {
	t.Run("dwell", func(t *testing.T) {
		r := newHiddenRig(t, "", `failback_dwell = "2m"`)
		r.round() // level 1 healthy, the dwell (from the failover) holds
		v := r.view()
		if v.Level != 2 || v.Waiting == nil || v.Waiting.Why != api.WaitingDwell || v.Waiting.Level != 1 || v.Waiting.Until == nil {
			t.Fatalf("level 1 healthy in the dwell: level %d, waiting %+v", v.Level, v.Waiting)
		}
		if failover := r.now.Add(-30 * time.Second); !v.Waiting.Until.After(r.now) || v.Waiting.Until.After(failover.Add(2*time.Minute)) {
			t.Errorf("the dwell ends %v, want after now (%v) and at most 2m after the failover (%v)", v.Waiting.Until, r.now, failover)
		}
		for v.Level == 2 && r.now.Before(v.Waiting.Until.Add(time.Minute)) {
			r.round()
			v = r.view()
		}
		if v.Level != 1 || v.Waiting != nil {
			t.Errorf("after the dwell: level %d, waiting %+v", v.Level, v.Waiting)
		}
	})
	t.Run("manual", func(t *testing.T) {
		r := newHiddenRig(t, `failback = "manual"`, "")
		r.round()
		v := r.view()
		if v.Level != 2 || v.Waiting == nil || v.Waiting.Why != api.WaitingManual || v.Waiting.Command != "vigil switch www 1" {
			t.Fatalf("manual failback: level %d, waiting %+v", v.Level, v.Waiting)
		}
		if _, err := r.e.Switch(context.Background(), "www", 1, "ops"); err != nil {
			t.Fatal(err)
		}
		if v := r.view(); v.Level != 1 || v.Waiting != nil {
			t.Errorf("after the switch: level %d, waiting %+v", v.Level, v.Waiting)
		}
	})
	t.Run("drill", func(t *testing.T) {
		r := newHiddenRig(t, "", "")
		r.round()
		r.round() // back on level 1 (auto failback)
		if v := r.view(); v.Level != 1 || v.Drill != nil {
			t.Fatalf("before the drill: level %d, drill %+v", v.Level, v.Drill)
		}
		if _, err := r.e.StartDrill(context.Background(), "www", engine.DrillRequest{Level: 1, For: 5 * time.Minute}, "ops"); err != nil {
			t.Fatal(err)
		}
		v := r.view()
		if v.Drill == nil || v.Drill.Level != 1 || v.Drill.Actor != "ops" || v.Drill.Until == nil || !v.Drill.Until.Equal(v.Drill.Started.Add(5*time.Minute)) {
			t.Fatalf("a running drill: %+v", v.Drill)
		}
		if _, err := r.e.AbortDrill(context.Background(), "www", "ops"); err != nil {
			t.Fatal(err)
		}
		if v := r.view(); v.Drill != nil {
			t.Errorf("after the abort: drill %+v", v.Drill)
		}
	})
	t.Run("ramp", func(t *testing.T) {
		r := newHiddenRig(t, "", `ramp {
      steps    = [10, 50, 75, 100]
      interval = "1m"
    }`)
		var steps []string
		for i := 0; i < 12; i++ {
			r.round()
			if rp := r.view().Ramp; rp != nil {
				steps = append(steps, strings.Join([]string{strconv.Itoa(rp.Step), strconv.Itoa(rp.Steps), strconv.Itoa(rp.Weight)}, "/"))
			}
		}
		if got, want := strings.Join(compact(steps), " "), "1/4/10 2/4/50 3/4/75"; got != want {
			t.Errorf("the view's ramp steps (step/steps/weight) %q, want %q", got, want)
		}
		got := strings.Join(r.journal(decide.KindRampStep), "\n")
		want := strings.Join([]string{
			"failback ramp: 10% of new requests to level 1, the rest on level 2",
			"failback ramp: 50% of new requests to level 1, the rest on level 2",
			"failback ramp: 75% of new requests to level 1, the rest on level 2",
			"failback ramp over: all new requests on level 1",
		}, "\n")
		if got != want {
			t.Errorf("the journal's ramp steps:\n%s\nwant\n%s", got, want)
		}
	})
}

// compact drops repeats in a row.
func compact(s []string) []string {
	var out []string
	for _, x := range s {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}
