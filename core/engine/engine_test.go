package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

const twoLevels = `
control {
  round_interval = "200ms"
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

func kindsOf(t *testing.T, evs []decide.Event) string {
	t.Helper()
	var out []string
	for _, e := range evs {
		out = append(out, e.String())
	}
	return strings.Join(out, "; ")
}

func TestFailoverPersistsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := enginetest.Sources{}
	e, st := enginetest.Start(t, enginetest.Config(t, twoLevels), src, dir)
	e.RunRound(ctx)
	e.RunRound(ctx)
	src["direct"].SetDown("www", "a1", true)
	src["direct"].SetDown("www", "a2", true)
	switched := 0
	for i := 1; i <= 4 && e.Views().Site("www").Level == 1; i++ {
		e.RunRound(ctx)
		switched = i
	}
	if e.Views().Site("www").Level != 2 || switched != 3 {
		t.Fatalf("level %d after %d failed rounds; want level 2 after 3 (unhealthy_threshold)", e.Views().Site("www").Level, switched)
	}
	pubBefore := e.Hub().Current().Version
	if got := e.Hub().Current().Sites[0].Level; got != 2 {
		t.Fatalf("publication level %d, want 2", got)
	}
	evs, err := e.Events(ctx, 0, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Close the engine and store, and start again on the same data.
	e.Close()
	st.Close()

	src2 := enginetest.Sources{}
	e2, _ := enginetest.Start(t, enginetest.Config(t, twoLevels), src2, dir)
	v := e2.Views().Site("www")
	if v.Level != 2 || v.Origins["a1"].State != "unhealthy" || v.Origins["b1"].State != "healthy" {
		t.Fatalf("after restart: level %d, a1 %s, b1 %s", v.Level, v.Origins["a1"].State, v.Origins["b1"].State)
	}
	if e2.Hub().Current().Version != pubBefore {
		t.Fatalf("publication version %d after restart, want %d", e2.Hub().Current().Version, pubBefore)
	}
	evs2, _ := e2.Events(ctx, 0, "", 1000)
	if len(evs2) != len(evs) || evs2[len(evs2)-1].Seq != evs[len(evs)-1].Seq {
		t.Fatalf("journal has %d events after restart, want %d", len(evs2), len(evs))
	}
	// Same votes again: no repeated switch, no duplicated event.
	src2["direct"].SetDown("www", "a1", true)
	src2["direct"].SetDown("www", "a2", true)
	e2.RunRound(ctx)
	more, _ := e2.Events(ctx, evs[len(evs)-1].Seq, "", 100)
	if len(more) != 0 {
		t.Fatalf("a round after restart emitted %v", more)
	}
}

func TestActionsAreJournaledWithActor(t *testing.T) {
	ctx := context.Background()
	e, _ := enginetest.Start(t, enginetest.Config(t, twoLevels), enginetest.Sources{}, "")
	tests := []struct {
		name    string
		do      func() ([]decide.Event, error)
		want    string
		wantErr string
	}{
		{"switch", func() ([]decide.Event, error) { return e.Switch(ctx, "www", 2, "alice") }, "level 1 -> 2 (manual)", ""},
		{"switch unknown level", func() ([]decide.Event, error) { return e.Switch(ctx, "www", 9, "alice") }, "", "site www has no level 9"},
		{"switch unknown site", func() ([]decide.Event, error) { return e.Switch(ctx, "nope", 1, "alice") }, "", "no site nope"},
		{"disable", func() ([]decide.Event, error) { return e.Disable(ctx, "www", "a1", "bob") }, "origin a1: unknown -> disabled", ""},
		{"disable again", func() ([]decide.Event, error) { return e.Disable(ctx, "www", "a1", "bob") }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := tt.do()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := kindsOf(t, evs); got != tt.want {
				t.Fatalf("events %q, want %q", got, tt.want)
			}
		})
	}
	evs, _ := e.Events(ctx, 0, "www", 100)
	if len(evs) != 2 || evs[0].Actor != "alice" || evs[1].Actor != "bob" {
		t.Fatalf("journal %+v", evs)
	}
	v := e.Views().Site("www")
	if v.Failback != "auto" || !v.ManualHold || v.EffectiveFailback != "manual" || v.Origins["a1"].State != "disabled" || !strings.Contains(v.Origins["a1"].Reason, "bob") {
		t.Fatalf("view after actions: %+v", v)
	}
	pub := e.Hub().Current()
	if pub.Sites[0].Level != 2 || len(pub.Sites[0].Origins) != 1 || pub.Sites[0].Origins[0].Name != "b1" {
		t.Fatalf("publication after switch: %+v", pub.Sites[0])
	}
}

func TestReload(t *testing.T) {
	ctx := context.Background()
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, twoLevels), src, "")
	e.RunRound(ctx)
	e.RunRound(ctx)
	if _, err := e.Switch(ctx, "www", 2, "t"); err != nil {
		t.Fatal(err)
	}
	// Level 2 disappears, a3 is new, a2 is removed.
	next := enginetest.Config(t, `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a3" { address = "http://127.0.0.1:18004" }
}`)
	if d := e.Reload(ctx, next); d.HasErrors() {
		t.Fatal(d.Error())
	}
	v := e.Views().Site("www")
	tests := []struct {
		name string
		ok   bool
	}{
		{"moved to the top level", v.Level == 1},
		{"kept a1's state", v.Origins["a1"].State == "healthy"},
		{"new origin unknown", v.Origins["a3"].State == "unknown"},
		{"removed origin dropped", len(v.Origins) == 2},
		{"hold cleared with the level", !v.ManualHold && v.EffectiveFailback == "auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Fatalf("view after reload: %+v", v)
			}
		})
	}
	evs, _ := e.Events(ctx, 0, "www", 100)
	last := evs[len(evs)-1].Event
	if last.Kind != decide.KindLevelSwitched || last.Reason != decide.ReasonConfig || last.FromLevel != 2 || last.ToLevel != 1 {
		t.Fatalf("last event %v, want a config switch 2 -> 1", last)
	}
}

func TestRestartRepublishesChangedContent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, st := enginetest.Start(t, enginetest.Config(t, twoLevels), enginetest.Sources{}, dir)
	e.RunRound(ctx)
	e.RunRound(ctx)
	v1 := e.Hub().Current().Version
	e.Close()
	st.Close()

	t.Run("same content keeps the version", func(t *testing.T) {
		e2, st2 := enginetest.Start(t, enginetest.Config(t, twoLevels), enginetest.Sources{}, dir)
		if got := e2.Hub().Current().Version; got != v1 {
			t.Fatalf("version %d after a restart with the same content, want %d", got, v1)
		}
		e2.Close()
		st2.Close()
	})
	t.Run("changed content gets a new version", func(t *testing.T) {
		// a2 is gone while vigil was down: nodes holding v1 must hear of it.
		changed := strings.Replace(twoLevels, `origin "a2" { address = "http://127.0.0.1:18002" }`, `origin "a3" { address = "http://127.0.0.1:18004" }`, 1)
		e3, _ := enginetest.Start(t, enginetest.Config(t, changed), enginetest.Sources{}, dir)
		snap := e3.Hub().Current()
		if snap.Version <= v1 {
			t.Fatalf("version %d after a restart with changed content, want > %d", snap.Version, v1)
		}
		names := []string{}
		for _, o := range snap.Sites[0].Origins {
			names = append(names, o.Name)
		}
		if strings.Join(names, ",") != "a1,a3" {
			t.Fatalf("published origins %v, want a1,a3", names)
		}
	})
}
