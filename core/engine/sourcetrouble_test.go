package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
)

const twoSources = `
source "faulty" { plugin = "vigil-source-faulty" }
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
`

func sourceInfo(t *testing.T, sources []api.SourceInfo, name string) api.SourceInfo {
	t.Helper()
	for _, s := range sources {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no source %q in %+v", name, sources)
	return api.SourceInfo{}
}

// TestSourceTroubleAndProbe: a source failing every round shows in
// Sources (GET /v1/sources) with its error and its failed rounds, and in a
// probe with its error; once it answers again it is no longer failing,
// and its recent failures stay counted.
func TestSourceTroubleAndProbe(t *testing.T) {
	ctx := context.Background()
	src := enginetest.Sources{}
	e, _ := enginetest.Start(t, enginetest.Config(t, twoSources), src, "")
	e.RunRound(ctx)
	if got := sourceInfo(t, e.Sources(), "faulty"); got.Failing() || got.LastError != "" || got.RecentRounds != 1 {
		t.Fatalf("healthy source = %+v", got)
	}
	src["faulty"].SetError(errors.New(`source "faulty": plugin error: quota exhausted (ResourceExhausted)`))
	for range 3 {
		e.RunRound(ctx)
	}
	got := sourceInfo(t, e.Sources(), "faulty")
	if !got.Failing() || got.FailingRounds != 3 || got.RecentFailures != 3 || got.RecentRounds != 4 ||
		got.LastError != `source "faulty": plugin error: quota exhausted (ResourceExhausted)` || got.LastErrorAt == nil {
		t.Errorf("failing source = %+v", got)
	}
	if d := sourceInfo(t, e.Sources(), "direct"); d.Failing() || d.LastError != "" {
		t.Errorf("direct, which answered, = %+v", d)
	}
	res, err := e.ProbeSite(ctx, "www")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 || res.Failed[0].Source != "faulty" || res.Failed[0].Error != got.LastError {
		t.Errorf("probe failures = %+v", res.Failed)
	}
	if by := res.Origins[0].By; by == nil || *by != "direct" {
		t.Errorf("probe settled by %v, want direct", by)
	}
	// A probe is no round: the counts stay.
	if again := sourceInfo(t, e.Sources(), "faulty"); again.RecentRounds != 4 {
		t.Errorf("a probe counted as a round: %+v", again)
	}

	src["faulty"].SetError(nil)
	for range 10 {
		e.RunRound(ctx)
	}
	got = sourceInfo(t, e.Sources(), "faulty")
	if got.Failing() || got.RecentFailures != 0 || got.RecentRounds != 10 || got.LastError == "" {
		t.Errorf("recovered source after 10 good rounds = %+v, want not failing, its last error kept", got)
	}
	res, err = e.ProbeSite(ctx, "www")
	if err != nil || len(res.Failed) != 0 {
		t.Errorf("probe of a recovered source: %+v, %v", res, err)
	}
}
