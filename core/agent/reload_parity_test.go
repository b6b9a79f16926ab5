package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// openEngine opens the store in dir and an engine for cfg on it, with the
// fake sources; close stops both.
func openEngine(t *testing.T, cfg *config.Config, dir string, sources enginetest.Sources) (e *engine.Engine, st *store.Bolt, close func()) {
	t.Helper()
	st, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, NewSource: sources.Factory()})
	if diags.HasErrors() {
		st.Close()
		t.Fatal(diags.Error())
	}
	done := false
	close = func() {
		if !done {
			done = true
			e.Close()
			st.Close()
		}
	}
	t.Cleanup(close)
	return e, st, close
}

// copyDir copies the files of dir into a new folder.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// durable is what an engine holds that a restart keeps: the stored site
// records (the times of the sites added by the reload left out: each
// engine gives them its own now) and the publication's sites.
func durable(t *testing.T, e *engine.Engine, st store.Store, added map[string]bool) (records map[string]string, pub []publication.Site) {
	t.Helper()
	state, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	records = map[string]string{}
	for name, r := range state.Sites {
		if added[name] {
			for k, o := range r.Origins {
				o.Since = time.Time{}
				r.Origins[k] = o
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		records[name] = string(b)
	}
	return records, e.Hub().Current().Sites
}

// TestReloadParity: an engine that reloads a configuration with sites
// added, removed and changed holds exactly what a fresh start with the
// new configuration, on the state the reload started from, holds: the same
// stored records and the same publication. The configurations are loaded
// as the agent loads them (config.LoadCached), so that the new one takes
// its unchanged sites from the old one.
func TestReloadParity(t *testing.T) {
	f := newFleetFile(t)
	f.write(t, 40, nil)
	oldCfg, diags := config.LoadCached(f.path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	dataA := t.TempDir()
	sources := enginetest.Sources{}
	eA, _, closeA := openEngine(t, oldCfg, dataA, sources)
	ctx := context.Background()

	// A state worth keeping: s001 failed over by its votes, s002 switched
	// by hand, s003's backup disabled, s004 changed below while down.
	sources["direct"].SetDown("s000001", "a", true)
	sources["direct"].SetDown("s000004", "a", true)
	for range 3 {
		if res := eA.RunRound(ctx); !res.Saved {
			t.Fatalf("round %d not saved", res.Round)
		}
	}
	if _, err := eA.Switch(ctx, "s000002", 2, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := eA.Disable(ctx, "s000003", "b", "test"); err != nil {
		t.Fatal(err)
	}
	// The state the reload starts from, for the fresh start.
	closeA()
	dataB := copyDir(t, dataA)
	eA, stA, _ := openEngine(t, oldCfg, dataA, sources)

	// Sites 10-14 removed, 40-49 added, s004's level-1 origin and s005's
	// hostname changed.
	f.write(t, 50, func(i int) bool { return i == 4 })
	src, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for i := 10; i < 15; i++ {
		name := siteName(i)
		start := strings.Index(text, "site \""+name+"\"")
		end := start + strings.Index(text[start:], "\n}\n") + 3
		text = text[:start] + text[end:]
	}
	text = strings.Replace(text, "s000005.example.com", "shop.example.com", 1)
	if err := os.WriteFile(f.path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	newCfg, diags := config.LoadCached(f.path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if newCfg.Site(siteName(3)) != oldCfg.Site(siteName(3)) { // before every change that moved the blocks
		t.Error("an unchanged site was decoded again, not taken from the configuration in force")
	}
	if d := eA.Reload(ctx, newCfg); d.HasErrors() {
		t.Fatal(d.Error())
	}
	eB, stB, _ := openEngine(t, newCfg, dataB, sources)

	added := map[string]bool{}
	for i := 40; i < 50; i++ {
		added[siteName(i)] = true
	}
	recA, pubA := durable(t, eA, stA, added)
	recB, pubB := durable(t, eB, stB, added)
	if len(recA) != 45 {
		t.Errorf("%d site records after the reload, want 45", len(recA))
	}
	for name, b := range recB {
		if recA[name] != b {
			t.Errorf("site %s after the reload:\n%s\nafter a fresh start:\n%s", name, recA[name], b)
		}
	}
	for name := range recA {
		if _, ok := recB[name]; !ok {
			t.Errorf("site %s is stored after the reload, not after a fresh start", name)
		}
	}
	if !reflect.DeepEqual(pubA, pubB) {
		a, _ := json.Marshal(pubA)
		b, _ := json.Marshal(pubB)
		t.Errorf("publication after the reload:\n%s\nafter a fresh start:\n%s", a, b)
	}
	// What the state says survived: the switch, the failover, the
	// disabled backup.
	levels := map[string]int{}
	for _, s := range pubA {
		levels[s.Name] = s.Level
	}
	if levels["s000001"] != 2 || levels["s000002"] != 2 || levels["s000000"] != 1 {
		t.Errorf("levels after the reload: s000000 %d, s000001 %d, s000002 %d; want 1, 2, 2", levels["s000000"], levels["s000001"], levels["s000002"])
	}
	if !strings.Contains(recA["s000003"], `"disabled_by":"operator"`) {
		t.Errorf("s000003 after the reload: %s; want its backup disabled by the operator", recA["s000003"])
	}
}

func siteName(i int) string { return fmt.Sprintf("s%06d", i) }
