package pluginhost

import (
	"context"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// fakeMember counts its starts and closes; fail makes Start refuse.
type fakeMember struct {
	name           string
	fail           bool
	mu             sync.Mutex
	starts, closes int
}

func (f *fakeMember) Name() string { return f.name }
func (f *fakeMember) Start(context.Context) hcl.Diagnostics {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.fail {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "refused"}}
	}
	return nil
}
func (f *fakeMember) Close() { f.mu.Lock(); f.closes++; f.mu.Unlock() }

func chain(t *testing.T, blocks ...[2]string) *config.Config {
	t.Helper()
	cfg := &config.Config{}
	for _, b := range blocks {
		cfg.Sources = append(cfg.Sources, &config.Source{Name: b[0], Plugin: "vigil-source-" + b[0], ConfigText: b[1]})
	}
	return cfg
}

func TestSetKeepsWhatDidNotChange(t *testing.T) {
	ctx := context.Background()
	made := map[string][]*fakeMember{}
	failing := map[string]bool{}
	newMember := func(s *config.Source) *fakeMember {
		m := &fakeMember{name: s.Name, fail: failing[s.Name]}
		made[s.Name] = append(made[s.Name], m)
		return m
	}
	s1, diags := Set[*fakeMember]{}.Next(ctx, chain(t, [2]string{"node", "a = 1"}, [2]string{"direct", ""}), newMember)
	if diags.HasErrors() || len(s1.Members()) != 2 {
		t.Fatalf("first set: %v %v", s1.Members(), diags)
	}
	// A comment in node's block, a new value in direct's, a new source.
	s2, diags := s1.Next(ctx, chain(t, [2]string{"node", "a = 1 # same"}, [2]string{"direct", "t = 2"}, [2]string{"dnspup", ""}), newMember)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if s2.Members()[0] != made["node"][0] || len(made["node"]) != 1 {
		t.Errorf("node was restarted for a comment")
	}
	if s2.Members()[1] == made["direct"][0] || made["direct"][1].starts != 1 {
		t.Errorf("direct was not restarted for a changed value")
	}
	if made["direct"][0].closes != 0 {
		t.Errorf("Next closed a member of the old set before it was installed")
	}
	s1.Retire(s2)
	if made["direct"][0].closes != 1 || made["node"][0].closes != 0 {
		t.Errorf("Retire: old direct closed %d times (want 1), kept node %d (want 0)", made["direct"][0].closes, made["node"][0].closes)
	}

	// A source that fails to start: what Next started is closed, and the
	// set in force is untouched.
	failing["broken"] = true
	s3, diags := s2.Next(ctx, chain(t, [2]string{"node", "a = 1"}, [2]string{"direct", "t = 3"}, [2]string{"broken", ""}), newMember)
	if !diags.HasErrors() {
		t.Fatal("Next with a failing source succeeded")
	}
	if len(s3.Members()) != len(s2.Members()) || s3.Members()[1] != s2.Members()[1] {
		t.Errorf("a failed Next did not return the set in force")
	}
	if made["direct"][2].closes != 1 || made["broken"][0].closes != 1 {
		t.Errorf("the members a failed Next started were not closed")
	}
	if s2.Members()[1].closes != 0 {
		t.Errorf("a failed Next closed a member in force")
	}
	s2.Close()
	for name, ms := range made {
		for i, m := range ms {
			if m.closes > 1 {
				t.Errorf("%s #%d closed %d times", name, i, m.closes)
			}
		}
	}
}
