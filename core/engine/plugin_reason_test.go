package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/sdk"
)

// reasonSource votes down on every target with reason tls_failed and a
// plugin reason of its own, a new one each round when fresh is set; and
// reports metrics of its own.
type reasonSource struct {
	*enginetest.Source
	mu      sync.Mutex
	round   int
	fresh   bool
	metrics []sdk.Metric
}

func (s *reasonSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.round++
	reason := "tlscheck/cert_expiring"
	if s.fresh {
		reason = fmt.Sprintf("tlscheck/made_up_%d", s.round)
	}
	votes := make([]sdk.Vote, len(b.Targets))
	for i, t := range b.Targets {
		votes[i] = sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: "tls-1", Value: sdk.Down, Reason: sdk.ReasonTLSFailed,
			PluginReason: reason, Detail: "expires in 3 days"}
	}
	return votes, nil
}

func (s *reasonSource) Metrics() []sdk.Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metrics
}

func newReasonEngine(t *testing.T, sources map[string]engine.VoteSource) (*engine.Engine, *prometheus.Registry) {
	t.Helper()
	cfg := enginetest.Config(t, `
source "tls" { plugin = "vigil-source-tls" }
source "other" { plugin = "vigil-source-tls" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}`)
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, Registerer: reg,
		NewSource: func(c *config.Source, _ string, _ hclog.Logger) engine.VoteSource { return sources[c.Name] }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	return e, reg
}

// family returns the series of the family name, each as its labels
// ("k=v,k=v", sorted as Prometheus sorts them) and value.
func family(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(ls, ",")] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}

// TestPluginReasonOfVotes: a vote's plugin reason is a field of the site
// view's vote, apart from its detail; the origin's reason puts it before
// the detail; and vigil_vote_plugin_reasons_total counts the votes by it.
func TestPluginReasonOfVotes(t *testing.T) {
	src := &reasonSource{Source: enginetest.NewSource("tls")}
	e, reg := newReasonEngine(t, map[string]engine.VoteSource{"tls": src, "other": enginetest.NewSource("other")})
	for range 2 {
		e.RunRound(context.Background())
	}
	a1 := e.Views().Site("www").Origins["a1"]
	if len(a1.Votes) != 1 {
		t.Fatalf("a1's votes %+v, want the one of tls", a1.Votes)
	}
	v := a1.Votes[0]
	if v.Reason != "tls_failed" || v.PluginReason != "tlscheck/cert_expiring" || v.Detail != "expires in 3 days" {
		t.Errorf("vote %+v, want reason tls_failed, plugin reason tlscheck/cert_expiring, detail %q", v, "expires in 3 days")
	}
	if want := "tls: tls_failed (tlscheck/cert_expiring: expires in 3 days)"; !strings.Contains(a1.Reason, want) {
		t.Errorf("a1's reason %q, want it to hold %q", a1.Reason, want)
	}
	got := family(t, reg, "vigil_vote_plugin_reasons_total")
	if n := got["outcome=down,reason=tlscheck/cert_expiring,source=tls"]; n != 4 {
		t.Errorf("vigil_vote_plugin_reasons_total %v, want 4 down votes (2 origins, 2 rounds) of tlscheck/cert_expiring", got)
	}
}

// TestPluginReasonLabelsBounded: a plugin that invents a new reason every
// round gets at most MaxReasonLabels reason labels; the votes of the rest
// count under reason="other", and each vote still shows its own.
func TestPluginReasonLabelsBounded(t *testing.T) {
	src := &reasonSource{Source: enginetest.NewSource("tls"), fresh: true}
	e, reg := newReasonEngine(t, map[string]engine.VoteSource{"tls": src, "other": enginetest.NewSource("other")})
	const rounds = engine.MaxReasonLabels + 3
	for range rounds {
		e.RunRound(context.Background())
	}
	got := family(t, reg, "vigil_vote_plugin_reasons_total")
	if len(got) != engine.MaxReasonLabels+1 {
		t.Errorf("%d series, want %d reasons and other", len(got), engine.MaxReasonLabels)
	}
	if n := got["outcome=down,reason=other,source=tls"]; n != 2*3 {
		t.Errorf("reason=other counts %v votes, want 6 (the last 3 rounds' 2 origins)", n)
	}
	a1 := e.Views().Site("www").Origins["a1"]
	if want := fmt.Sprintf("tlscheck/made_up_%d", rounds); len(a1.Votes) != 1 || a1.Votes[0].PluginReason != want {
		t.Errorf("a1's votes %+v, want plugin reason %s", a1.Votes, want)
	}
}

// TestPluginMetricsExported: the series a plugin reports are exported as
// vigil_plugin_<name> with a label source; a second source's series of
// the same name that disagree on the labels are left out, so that the
// page stays valid.
func TestPluginMetricsExported(t *testing.T) {
	spent := sdk.Metric{Name: "dnspup_quota_requests_total", Kind: sdk.MetricCounter, Value: 7, Help: "POSTs dnspup accepted", Labels: map[string]string{"result": "spent"}}
	first := &reasonSource{Source: enginetest.NewSource("tls"), metrics: []sdk.Metric{spent,
		{Name: "dnspup_queue", Kind: sdk.MetricGauge, Value: 2.5}}}
	odd := spent
	odd.Labels = map[string]string{"kind": "spent"}
	second := &reasonSource{Source: enginetest.NewSource("other"), metrics: []sdk.Metric{odd,
		{Name: "dnspup_queue", Kind: sdk.MetricGauge, Value: 1}}}
	_, reg := newReasonEngine(t, map[string]engine.VoteSource{"tls": first, "other": second})
	if got := family(t, reg, "vigil_plugin_dnspup_quota_requests_total"); len(got) != 1 || got["result=spent,source=tls"] != 7 {
		t.Errorf("vigil_plugin_dnspup_quota_requests_total %v, want only result=spent,source=tls 7", got)
	}
	if got := family(t, reg, "vigil_plugin_dnspup_queue"); len(got) != 2 || got["source=tls"] != 2.5 || got["source=other"] != 1 {
		t.Errorf("vigil_plugin_dnspup_queue %v, want source=tls 2.5 and source=other 1", got)
	}
}
