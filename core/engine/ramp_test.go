package engine_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const rampConfig = `
control {
  round_interval = "30s"
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
    ramp {
      steps    = [10, 50, 100]
      interval = "1m"
    }
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

// TestRampAcrossRestart: an automatic failback with a ramp shows the ramp
// in the site view, the publication (Format 2) and the metrics, keeps it
// across a restart (same publication version), and steps on the wall
// clock while the recovering level is healthy.
func TestRampAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	start := func(src enginetest.Sources) (*engine.Engine, store.Store) {
		st, err := store.Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		e, diags := engine.New(ctx, enginetest.Config(t, rampConfig), engine.Options{Store: st, NewSource: src.Factory(), Now: clock})
		if diags.HasErrors() {
			st.Close()
			t.Fatal(diags.Error())
		}
		return e, st
	}
	src := enginetest.Sources{}
	e, st := start(src)
	round := func(e *engine.Engine) {
		now = now.Add(30 * time.Second)
		e.RunRound(ctx)
	}
	round(e)
	src["direct"].SetDown("www", "a1", true)
	src["direct"].SetDown("www", "a2", true)
	round(e)
	if v := e.Views().Site("www"); v.Level != 2 || v.Ramp != nil {
		t.Fatalf("after the failover: level %d ramp %+v", v.Level, v.Ramp)
	}
	src["direct"].SetDown("www", "a1", false)
	src["direct"].SetDown("www", "a2", false)
	round(e)
	failback := now
	check := func(e *engine.Engine, weight int) {
		t.Helper()
		v := e.Views().Site("www")
		if v.Level != 1 || v.Ramp == nil || v.Ramp.From != 2 || v.Ramp.Weight != weight || v.Ramp.NextStepAt == nil {
			t.Fatalf("view: level %d ramp %+v, want weight %d from 2", v.Level, v.Ramp, weight)
		}
		pub := e.Hub().Current()
		r := pub.Sites[0].Ramp
		if pub.Format != publication.FormatRamp || r == nil || r.Weight != weight || r.From != 2 || len(r.FromOrigins) != 1 || r.FromOrigins[0].Name != "b1" {
			t.Fatalf("publication: format %d ramp %+v", pub.Format, r)
		}
		var m strings.Builder
		if err := e.Views().WriteMetrics(&m); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`vigil_site_level_weight{level="1",site="www"} ` + strconv.Itoa(weight), `vigil_site_level_weight{level="2",site="www"} ` + strconv.Itoa(100-weight)} {
			if !strings.Contains(m.String(), want+"\n") {
				t.Fatalf("metrics lack %q", want)
			}
		}
	}
	check(e, 10)
	if got := e.Views().Site("www").Ramp.NextStepAt; !got.Equal(failback.Add(45 * time.Second)) {
		t.Fatalf("next step at %v, want the failback + 2 rounds less half a round", got)
	}
	version := e.Hub().Current().Version
	e.Close()
	st.Close()

	e, st = start(enginetest.Sources{})
	defer func() { e.Close(); st.Close() }()
	check(e, 10)
	if got := e.Hub().Current().Version; got != version {
		t.Fatalf("publication version %d after the restart, want %d", got, version)
	}
	round(e) // 30s after the failback: not yet
	check(e, 10)
	round(e) // 60s: the step
	check(e, 50)
	round(e)
	round(e) // 100: over
	v := e.Views().Site("www")
	if v.Ramp != nil || v.Level != 1 || e.Hub().Current().Format != 0 || e.Hub().Current().Sites[0].Ramp != nil {
		t.Fatalf("after the last step: view ramp %+v, publication %+v", v.Ramp, e.Hub().Current())
	}
}

// TestNoRampNoWeightSeries: without a ramp configured no
// vigil_site_level_weight is written, not even its header.
func TestNoRampNoWeightSeries(t *testing.T) {
	e, _ := enginetest.Start(t, enginetest.Config(t, twoLevels), enginetest.Sources{}, "")
	e.RunRound(context.Background())
	var m strings.Builder
	if err := e.Views().WriteMetrics(&m); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.String(), "vigil_site_level_weight") {
		t.Fatal("vigil_site_level_weight written without a ramp")
	}
}
