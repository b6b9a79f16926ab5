package engine_test

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
)

// TestReloadRestartsASourceOnlyForAChangeOfMeaning: a comment or a
// reformat of a source's config block restarts nothing; a changed value
// restarts that source only.
func TestReloadRestartsASourceOnlyForAChangeOfMeaning(t *testing.T) {
	starts := map[string]int{}
	factory := func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource {
		starts[c.Name]++
		return enginetest.NewSource(c.Name)
	}
	cfgWith := func(probeConfig string) *config.Config {
		return enginetest.Config(t, `
source "probe" {
  plugin = "vigil-source-direct"
  config {`+probeConfig+`}
}
source "other" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}`)
	}
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	e, diags := engine.New(ctx, cfgWith("\n    timeout = \"1s\"\n    user_agent = \"vigil\"\n  "), engine.Options{Store: st, NewSource: factory})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(e.Close)
	steps := []struct {
		name        string
		probeConfig string
		probeStarts int
	}{
		{"a comment and a reformat", "\n    # slower origins\n    user_agent=\"vigil\"\n    timeout    = \"1s\"\n  ", 1},
		{"a changed value", "\n    timeout = \"2s\"\n    user_agent = \"vigil\"\n  ", 2},
	}
	for _, s := range steps {
		if d := e.Reload(ctx, cfgWith(s.probeConfig)); d.HasErrors() {
			t.Fatalf("%s: %s", s.name, d.Error())
		}
		if starts["probe"] != s.probeStarts || starts["other"] != 1 {
			t.Fatalf("after %s: probe started %d times (want %d), other %d (want 1)", s.name, starts["probe"], s.probeStarts, starts["other"])
		}
	}
}
