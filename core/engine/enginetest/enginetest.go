package enginetest

import (
	"context"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// Source is an in-process vote source. By default every origin gets one
// "up" vote; Set changes the answer for one site/origin.
type Source struct {
	name string
	mu   sync.Mutex
	down map[[2]string]bool
	mute map[[2]string]bool
	err  error
	// Ballots counts Vote calls.
	Ballots int
}

// NewSource returns a source that votes up for everything.
func NewSource(name string) *Source {
	return &Source{name: name, down: map[[2]string]bool{}, mute: map[[2]string]bool{}}
}

// SetDown makes the source vote down (true) or up (false) for an origin.
func (s *Source) SetDown(site, origin string, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[[2]string{site, origin}] = down
}

// SetMute makes the source abstain for an origin.
func (s *Source) SetMute(site, origin string, mute bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mute[[2]string{site, origin}] = mute
}

// SetError makes every Vote fail with err (nil: answer again), as a
// plugin failing every round.
func (s *Source) SetError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Name implements engine.VoteSource.
func (s *Source) Name() string { return s.name }

// Start implements engine.VoteSource.
func (s *Source) Start(context.Context) hcl.Diagnostics { return nil }

// Close implements engine.VoteSource.
func (s *Source) Close() {}

// Vote implements engine.VoteSource.
func (s *Source) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Ballots++
	if s.err != nil {
		return nil, s.err
	}
	var out []sdk.Vote
	for _, t := range b.Targets {
		k := [2]string{t.Site, t.Origin}
		if s.mute[k] {
			continue
		}
		v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.name, Value: sdk.Up, Reason: sdk.ReasonOK}
		if s.down[k] {
			v.Value, v.Reason, v.Detail = sdk.Down, sdk.ReasonConnectFailed, "scripted down"
		}
		out = append(out, v)
	}
	return out, nil
}

// Sources maps source names to fakes; Factory plugs them into an engine.
type Sources map[string]*Source

// Factory returns an engine.Options.NewSource that serves the fakes,
// creating one per source name on first use.
func (fs Sources) Factory() func(*config.Source, string, hclog.Logger) engine.VoteSource {
	var mu sync.Mutex
	return func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource {
		mu.Lock()
		defer mu.Unlock()
		if fs[c.Name] == nil {
			fs[c.Name] = NewSource(c.Name)
		}
		return fs[c.Name]
	}
}

// Config parses an inline configuration or fails the test.
func Config(t testing.TB, src string) *config.Config {
	t.Helper()
	cfg, diags := config.Parse("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("config: %s", diags.Error())
	}
	return cfg
}

// Start builds an engine for cfg on a bbolt store in dir (t.TempDir() when
// empty) with the fake sources. The engine and store are closed at the end
// of the test.
func Start(t testing.TB, cfg *config.Config, sources Sources, dir string) (*engine.Engine, store.Store) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, NewSource: sources.Factory()})
	if diags.HasErrors() {
		st.Close()
		t.Fatalf("engine: %s", diags.Error())
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	return e, st
}
