package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/store"
)

// TestProbeAgeHistogram: with more sites than sites_per_round, the
// scheduler probes them in turn, and vigil_site_probe_age_seconds counts
// each eligible site once, at its age on the engine's clock at scrape
// time; a site whose health check is off is left out, and so is one never
// probed. vigil_site_probe_age_max_seconds is the oldest.
func TestProbeAgeHistogram(t *testing.T) {
	cfg := enginetest.Config(t, `
control {
  round_interval  = "30s"
  sites_per_round = 2
}
source "direct" { plugin = "vigil-source-direct" }
site "s1" {
  hostname = "s1.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
site "s2" {
  hostname = "s2.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
site "s3" {
  hostname = "s3.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
site "s4" {
  hostname = "s4.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}
site "paused" {
  hostname = "paused.example.com"
  health_check { enabled = false }
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}`)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	src := enginetest.NewSource("direct")
	st, err := store.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, diags := engine.New(context.Background(), cfg, engine.Options{Store: st, Registerer: reg, Now: clock.Now,
		NewSource: func(*config.Source, string, hclog.Logger) engine.VoteSource { return src }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Cleanup(func() { e.Close(); st.Close() })

	scrape := func(t *testing.T) (*dto.Histogram, float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var h *dto.Histogram
		most := -1.0
		for _, mf := range mfs {
			switch mf.GetName() {
			case "vigil_site_probe_age_seconds":
				h = mf.GetMetric()[0].GetHistogram()
			case "vigil_site_probe_age_max_seconds":
				most = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if h == nil || most < 0 {
			t.Fatal("no vigil_site_probe_age_seconds or vigil_site_probe_age_max_seconds")
		}
		return h, most
	}
	under := func(h *dto.Histogram, le float64) uint64 {
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == le {
				return b.GetCumulativeCount()
			}
		}
		t.Fatalf("no bucket le=%v", le)
		return 0
	}

	// steps: each runs `rounds` rounds, 30 s apart on the clock, then
	// waits `wait` and scrapes.
	for _, step := range []struct {
		name       string
		rounds     int
		wait       time.Duration
		count      uint64
		sum, most  float64
		le30, le60 uint64
	}{
		{"before any round: nothing probed", 0, 0, 0, 0, 0, 0, 0},
		{"one round: two sites", 1, 10 * time.Second, 2, 20, 10, 2, 2},
		// s1, s2 at 0 s; s3, s4 at 10 s; scraped at 40 s.
		{"a full cycle", 1, 30 * time.Second, 4, 40 + 40 + 30 + 30, 40, 2, 4},
		// s1, s2 again at 40 s; scraped at 65 s: 25, 25, 55, 55.
		{"the oldest first", 1, 25 * time.Second, 4, 25 + 25 + 55 + 55, 55, 2, 4},
	} {
		t.Run(step.name, func(t *testing.T) {
			for range step.rounds {
				e.RunRound(context.Background())
			}
			clock.advance(step.wait)
			h, most := scrape(t)
			if h.GetSampleCount() != step.count || h.GetSampleSum() != step.sum || most != step.most {
				t.Fatalf("count %d, sum %v, max %v; want %d, %v, %v", h.GetSampleCount(), h.GetSampleSum(), most, step.count, step.sum, step.most)
			}
			if got30, got60 := under(h, 30), under(h, 60); got30 != step.le30 || got60 != step.le60 {
				t.Errorf("le=30: %d, le=60: %d; want %d, %d", got30, got60, step.le30, step.le60)
			}
		})
	}
}
