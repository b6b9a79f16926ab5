package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/vigilcdn/vigil/core/engine"
)

// metrics serves GET /metrics through promhttp: the agent's registry and
// the current views' per-site series (families built at this scrape by
// engine.Views.SiteGatherer, in a registry's order, without one),
// in the format the scraper negotiates (text 0.0.4, OpenMetrics or
// protobuf) and compressed when it accepts it.
//
// Two query parameters choose a subset, so that a large fleet can be
// scraped in parts or its per-site series less often:
//
//	site=PREFIX      only the per-site series of sites whose names start with PREFIX
//	collect[]=GROUP  only these groups (agent, site, origin, probe); repeat it for more
func (h *handler) metrics(w http.ResponseWriter, r *http.Request) {
	agent, sel, err := metricsSelection(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error(),
			"collect[] takes "+strings.Join(engine.MetricsGroups, ", ")+"; site takes a prefix of site names: GET /metrics?collect[]=site&site=shop-")
		return
	}
	var gs pageGatherer
	if agent {
		gs = append(gs, h.Gatherer)
	}
	if v := h.Engine.Views(); v != nil && (sel.Sites || sel.Origins || sel.Probes) {
		gs = append(gs, v.SiteGatherer(sel))
	}
	promhttp.HandlerFor(gs, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorHandling:     promhttp.ContinueOnError,
		ErrorLog:          promLogger{h.Logger},
	}).ServeHTTP(w, r)
}

// metricsSelection reads site= and collect[]= of a /metrics request:
// whether it wants the agent's registry, and which per-site series.
func metricsSelection(q url.Values) (agent bool, sel engine.SiteMetrics, err error) {
	for k := range q {
		if k != "site" && k != "collect[]" {
			return false, sel, fmt.Errorf("/metrics has no parameter %q", k)
		}
	}
	if len(q["site"]) > 1 {
		return false, sel, fmt.Errorf("/metrics takes one site prefix, got %d", len(q["site"]))
	}
	sel.Prefix = q.Get("site")
	groups := q["collect[]"]
	if len(groups) == 0 {
		all := engine.AllSiteMetrics
		all.Prefix = sel.Prefix
		return true, all, nil
	}
	for _, g := range groups {
		if !slices.Contains(engine.MetricsGroups, g) {
			return false, sel, fmt.Errorf("/metrics has no group collect[]=%q", g)
		}
		switch g {
		case engine.MetricsGroupAgent:
			agent = true
		case engine.MetricsGroupSite:
			sel.Sites = true
		case engine.MetricsGroupOrigin:
			sel.Origins = true
		case engine.MetricsGroupProbe:
			sel.Probes = true
		}
	}
	return agent, sel, nil
}

// pageGatherer is the page's gatherers: the agent's registry, checked by
// itself, and the per-site gatherer. When their families' names are
// disjoint (the per-site families are never the agent's) their families
// are merged by name as they are, and not checked a second time as
// prometheus.Gatherers would, which at 100,000 sites would be most of a
// scrape's cost; otherwise prometheus.Gatherers merges them.
type pageGatherer []prometheus.Gatherer

func (g pageGatherer) Gather() ([]*dto.MetricFamily, error) {
	if len(g) == 1 {
		return g[0].Gather()
	}
	var all []*dto.MetricFamily
	var errs prometheus.MultiError
	seen := map[string]bool{}
	for _, one := range g {
		mfs, err := one.Gather()
		if err != nil {
			errs = append(errs, err)
		}
		for _, mf := range mfs {
			if seen[mf.GetName()] {
				return prometheus.Gatherers(g).Gather()
			}
			seen[mf.GetName()] = true
		}
		all = append(all, mfs...)
	}
	slices.SortFunc(all, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return all, errs.MaybeUnwrap()
}

// promLogger is promhttp's error log on the API's logger.
type promLogger struct{ l hclog.Logger }

func (p promLogger) Println(v ...any) {
	p.l.Warn("serving metrics: " + strings.TrimSpace(fmt.Sprintln(v...)))
}
