package engine

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// upSource votes up for every origin.
type upSource struct{}

func (upSource) Name() string                          { return "direct" }
func (upSource) Start(context.Context) hcl.Diagnostics { return nil }
func (upSource) Close()                                {}
func (upSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	out := make([]sdk.Vote, 0, len(b.Targets))
	for _, t := range b.Targets {
		out = append(out, sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: "direct", Value: sdk.Up, Reason: sdk.ReasonOK})
	}
	return out, nil
}

// A history file that cannot be written (closed under the feed, as a full
// or failing disk refuses writes) fails no round and delays none: every
// round is saved, and the failures are counted.
func TestHistoryWriteFailureDoesNotStopRounds(t *testing.T) {
	dir := t.TempDir()
	cfg, diags := config.Parse("t.hcl", []byte(`
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a" { address = "http://127.0.0.1:1" }
  origin "b" { address = "http://127.0.0.1:2" }
}`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	st, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, diags := New(context.Background(), cfg, Options{Store: st,
		NewSource: func(*config.Source, string, hclog.Logger) VoteSource { return upSource{} }})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	h := OpenHistory(dir, e, HistoryOptions{})
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	res := e.RunRound(ctx)
	h.AfterRound(res)
	h.Flush()
	if n := testutil.ToFloat64(h.written); n != 1 {
		t.Fatalf("%v rounds written, want 1", n)
	}
	h.ring.Close() // every write fails from now on
	for range 3 {
		res := e.RunRound(ctx)
		if !res.Saved || res.Probed != 1 {
			t.Fatalf("a round with a failing history: %+v", res)
		}
		h.AfterRound(res)
		h.Flush()
	}
	if n := testutil.ToFloat64(h.failed); n != 3 {
		t.Errorf("%v failed writes counted, want 3", n)
	}
	if _, err := h.SiteHistory("www"); err == nil {
		t.Error("reading a closed file gave no error")
	}
}
