package engine

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/sdk"
)

// The per-site families of /metrics, built as client_model's
// dto.MetricFamily straight from one Views snapshot: the page promhttp
// encodes is the one a registry would make of SiteCollector's const
// metrics (same families, series, order and values; a test pins it), for
// a fraction of the cost. A registry makes each series a const metric,
// its label pairs and a dto.Metric (four or five allocations), checks it,
// hashes it and sorts every family, and at 10,000 sites the sort alone
// (vigil_origin_state is ordered by origin before site) is most of a
// scrape. Here the series are cut from a few slabs, share their label
// pairs (one per site, origin, state, source, voter...) and their small
// integer values, and are made in the order the registry would sort them
// to, so that only the per-vote families, at most probe_series_sites
// sites, are sorted at all.

// SiteGatherer returns a gatherer of v's per-site families chosen by sel,
// in name order, each family's series in the order a registry sorts them:
// what the API's /metrics serves beside the agent's registry.
func (v *Views) SiteGatherer(sel SiteMetrics) prometheus.Gatherer {
	return siteGatherer{v: v, sel: sel}
}

type siteGatherer struct {
	v   *Views
	sel SiteMetrics
}

// The label names of the per-site families, shared by every label pair.
var (
	labelAddress = "address"
	labelLevel   = "level"
	labelOrigin  = "origin"
	labelPhase   = "phase"
	labelReason  = "reason"
	labelSite    = "site"
	labelSource  = "source"
	labelState   = "state"
	labelVoter   = "voter"
)

// stateOrder is the states of vigil_origin_state in the order of their
// label values ("disabled" < "healthy" < "unhealthy" < "unknown"), as a
// registry sorts the series of one origin.
var stateOrder = func() []decide.Health {
	s := []decide.Health{decide.Unknown, decide.Healthy, decide.Unhealthy, decide.Disabled}
	slices.SortFunc(s, func(a, b decide.Health) int { return strings.Compare(a.String(), b.String()) })
	return s
}()

func (g siteGatherer) Gather() ([]*dto.MetricFamily, error) {
	v, sel := g.v, g.sel
	from, to := v.span(sel.Prefix)
	b := newPageBuilder()
	var out []*dto.MetricFamily
	add := func(mf *dto.MetricFamily) {
		if len(mf.Metric) > 0 {
			out = append(out, mf)
		}
	}
	sitePairs := make([]*dto.LabelPair, to-from)
	for i := from; i < to; i++ {
		sitePairs[i-from] = b.pair(&labelSite, v.Name(i))
	}
	if sel.Sites {
		g.sites(b, from, to, sitePairs, add)
	}
	var order []originRef
	if sel.Origins || (sel.Probes && len(v.sites) <= v.probeSeries) {
		order = g.originOrder(b, from, to)
	}
	if sel.Origins {
		g.origins(b, order, from, sitePairs, add)
	}
	var err error
	if sel.Probes && len(v.sites) <= v.probeSeries {
		err = g.probes(b, order, from, sitePairs, add)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, err
}

// sites makes the one-per-site families: in site order, which is their
// label order, but vigil_site_level_weight's, which is by level first.
func (g siteGatherer) sites(b *pageBuilder, from, to int, sitePairs []*dto.LabelPair, add func(*dto.MetricFamily)) {
	v := g.v
	level, unhealthy, healthy := famSiteLevel.family(to-from), famSiteUnhealthyThreshold.family(to-from), famSiteHealthyThreshold.family(to-from)
	weight := famSiteLevelWeight.family(0)
	for i := from; i < to; i++ {
		spec, snap, site := v.fleet.Sites[i].Spec, v.sites[i], sitePairs[i-from]
		b.gauge(level, float64(snap.level), site)
		b.gauge(unhealthy, float64(spec.UnhealthyThreshold), site)
		b.gauge(healthy, float64(spec.HealthyThreshold), site)
		if spec.AntiFlap != nil && spec.AntiFlap.Ramp != nil {
			for _, l := range spec.Levels {
				b.gauge(weight, float64(levelWeight(snap, l)), b.levelPair(l), site)
			}
		}
	}
	sortSeries(weight)
	add(level)
	add(unhealthy)
	add(healthy)
	add(weight)
}

// originRef is one origin of a site: the site's position in the span,
// the origin's position in the site, and its label pair.
type originRef struct {
	site, origin int32
	pair         *dto.LabelPair
}

// originOrder is every origin of the span's sites in the order of the
// labels origin then site: sites are in name order, so the origins of
// one name are in order already and only the names are sorted.
func (g siteGatherer) originOrder(b *pageBuilder, from, to int) []originRef {
	v := g.v
	bucket := map[string]int{}
	var names []string
	var counts []int
	n := 0
	for i := from; i < to; i++ {
		for _, o := range v.fleet.Sites[i].Spec.Origins {
			k, ok := bucket[o.Name]
			if !ok {
				k = len(names)
				bucket[o.Name] = k
				names = append(names, o.Name)
				counts = append(counts, 0)
			}
			counts[k]++
			n++
		}
	}
	byName := make([]int, len(names))
	for k := range byName {
		byName[k] = k
	}
	slices.SortFunc(byName, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	start := make([]int, len(names))
	at := 0
	for _, k := range byName {
		start[k] = at
		at += counts[k]
	}
	order := make([]originRef, n)
	for i := from; i < to; i++ {
		for oi, o := range v.fleet.Sites[i].Spec.Origins {
			k := bucket[o.Name]
			order[start[k]] = originRef{site: int32(i - from), origin: int32(oi), pair: b.pair(&labelOrigin, o.Name)}
			start[k]++
		}
	}
	return order
}

// origins makes the per-origin families in origin, site (and state)
// order.
func (g siteGatherer) origins(b *pageBuilder, order []originRef, from int, sitePairs []*dto.LabelPair, add func(*dto.MetricFamily)) {
	v := g.v
	state := famOriginState.family(4 * len(order))
	failures, successes := famOriginFailures.family(len(order)), famOriginSuccesses.family(len(order))
	var states [decide.Disabled + 1]*dto.LabelPair
	for _, h := range stateOrder {
		states[h] = b.pair(&labelState, h.String())
	}
	for _, r := range order {
		o := &v.sites[from+int(r.site)].origins[r.origin]
		site := sitePairs[r.site]
		for _, h := range stateOrder {
			val := 0.0
			if h == o.state {
				val = 1
			}
			b.gauge(state, val, r.pair, site, states[h])
		}
		b.gauge(failures, float64(o.failures), r.pair, site)
		b.gauge(successes, float64(o.successes), r.pair, site)
	}
	add(failures)
	add(successes)
	add(state)
}

// probes makes the per-vote families and vigil_origin_info, as
// SiteCollector's collectProbes. Their series are made in origin and site
// order and then sorted by the rest of their labels; a series whose
// labels repeat an earlier one's (a voter that voted twice on an origin
// in a round) is left out with an error, as a registry does, and so is
// one whose voter is not UTF-8.
func (g siteGatherer) probes(b *pageBuilder, order []originRef, from int, sitePairs []*dto.LabelPair, add func(*dto.MetricFamily)) error {
	v := g.v
	chain := v.fleet.Chain
	info := famOriginInfo.family(len(order))
	success, duration, reason := famProbeSuccess.family(0), famProbeDuration.family(0), famProbeReason.family(0)
	status, phase, expiry := famProbeHTTPStatus.family(0), famProbeHTTPPhase.family(0), famProbeCertExpiry.family(0)
	sources := make([]*dto.LabelPair, len(chain))
	for k, s := range chain {
		sources[k] = b.pair(&labelSource, s.Name)
	}
	var phases [5]*dto.LabelPair
	for k, p := range HTTPPhases {
		phases[k] = b.pair(&labelPhase, p)
	}
	var reasons [256]*dto.LabelPair
	voters := map[string]*dto.LabelPair{}
	var errs prometheus.MultiError
	for _, r := range order {
		i := from + int(r.site)
		site := sitePairs[r.site]
		spec, cfg := v.fleet.Sites[i].Spec, v.fleet.Sites[i].Config
		o := &spec.Origins[r.origin]
		b.gauge(info, 1, b.pair(&labelAddress, originAddress(cfg, int(r.origin), o.Name)), b.levelPair(o.Level), r.pair, site)
		last := v.last[i]
		if last.rec == nil {
			continue
		}
		rs := &last.rec.sites[last.site]
		t := &last.rec.targets[rs.firstTarget+uint32(r.origin)]
		for k := t.votesFrom; k < t.votesTo; k++ {
			vr := &last.rec.votes[k]
			if int(vr.source) >= len(chain) {
				continue
			}
			voter := voters[vr.voter]
			if voter == nil {
				if !utf8.ValidString(vr.voter) {
					errs = append(errs, fmt.Errorf("site %q origin %q: voter %q is not UTF-8: its vigil_probe_* series are left out", v.Name(i), o.Name, vr.voter))
					continue
				}
				voter = b.pair(&labelVoter, vr.voter)
				voters[vr.voter] = voter
			}
			src := sources[vr.source]
			switch sdk.Value(vr.value) {
			case sdk.Up:
				b.gauge(success, 1, r.pair, site, src, voter)
			case sdk.Down:
				b.gauge(success, 0, r.pair, site, src, voter)
			}
			b.gauge(duration, float64(vr.latency)/1e6, r.pair, site, src, voter)
			if reasons[vr.reason] == nil {
				reasons[vr.reason] = b.pair(&labelReason, sdk.Reason(vr.reason).String())
			}
			b.gauge(reason, 1, r.pair, reasons[vr.reason], site, src, voter)
			if h := vr.http; h != nil {
				b.gauge(status, float64(h.StatusCode), r.pair, site, src, voter)
				for k, d := range [...]time.Duration{h.Resolve, h.Connect, h.TLS, h.Processing, h.Transfer} {
					b.gauge(phase, d.Seconds(), r.pair, phases[k], site, src, voter)
				}
				if !h.CertNotAfter.IsZero() {
					b.gauge(expiry, float64(h.CertNotAfter.Unix()), r.pair, site, src, voter)
				}
			}
		}
	}
	for _, mf := range []*dto.MetricFamily{info, success, duration, reason, status, phase, expiry} {
		sortSeries(mf)
		if dup := dropRepeats(mf); dup != nil {
			errs = append(errs, fmt.Errorf("%s%s: a voter voted more than once on an origin in a round (it is served once, with its first vote): the voter's plugin should send one vote a target", mf.GetName(), labelsText(dup)))
		}
		add(mf)
	}
	return errs.MaybeUnwrap()
}

// compareSeries orders two series of one family as a registry does: by
// their label values in the order of the label names.
func compareSeries(a, b *dto.Metric) int {
	for n, lp := range a.Label {
		if c := strings.Compare(lp.GetValue(), b.Label[n].GetValue()); c != 0 {
			return c
		}
	}
	return 0
}

// labelsText is a series' labels as the text format writes them.
func labelsText(m *dto.Metric) string {
	var b strings.Builder
	for k, lp := range m.Label {
		b.WriteString([]string{"{", ","}[min(k, 1)])
		fmt.Fprintf(&b, "%s=%q", lp.GetName(), lp.GetValue())
	}
	b.WriteString("}")
	return b.String()
}

// sortSeries puts a family's series in a registry's order, keeping the
// order of series with the same labels.
func sortSeries(mf *dto.MetricFamily) {
	if !slices.IsSortedFunc(mf.Metric, compareSeries) {
		slices.SortStableFunc(mf.Metric, compareSeries)
	}
}

// dropRepeats leaves out the series of a sorted family whose labels are
// the same as the one before, and returns the first one it left out (nil
// when none).
func dropRepeats(mf *dto.MetricFamily) *dto.Metric {
	var first *dto.Metric
	ms := mf.Metric[:0]
	for k, m := range mf.Metric {
		if k > 0 && compareSeries(mf.Metric[k-1], m) == 0 {
			if first == nil {
				first = m
			}
			continue
		}
		ms = append(ms, m)
	}
	mf.Metric = ms
	return first
}

// siteFamily is one per-site family: its name, help and label names (in
// order), which both SiteGatherer and SiteCollector make.
type siteFamily struct {
	name, help string
	labels     []string
}

func (f *siteFamily) desc() *prometheus.Desc {
	return prometheus.NewDesc(f.name, f.help, f.labels, nil)
}

// family is an empty gauge family of f, for n series.
func (f *siteFamily) family(n int) *dto.MetricFamily {
	return &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: dto.MetricType_GAUGE.Enum(), Metric: make([]*dto.Metric, 0, n)}
}

// slab is the size of the chunks a pageBuilder cuts its series from.
const slab = 4096

// pageBuilder cuts the series of one scrape, their gauges, label pairs
// and label lists from a few large slices rather than allocating each,
// and shares the pairs and values that repeat. Nothing it makes is
// changed once made: the families are read by one encoder.
type pageBuilder struct {
	metrics []dto.Metric
	gauges  []gaugeCell
	pairs   []pairCell
	lists   []*dto.LabelPair
	small   [256]*dto.Gauge // the gauges of the values 0 to 255
	levels  map[int]*dto.LabelPair
}

type gaugeCell struct {
	g dto.Gauge
	v float64
}

type pairCell struct {
	p dto.LabelPair
	v string
}

func newPageBuilder() *pageBuilder {
	return &pageBuilder{levels: map[int]*dto.LabelPair{}}
}

// pair is a label pair of name (one of the shared label names) and value.
func (b *pageBuilder) pair(name *string, value string) *dto.LabelPair {
	if len(b.pairs) == cap(b.pairs) {
		b.pairs = make([]pairCell, 0, slab)
	}
	b.pairs = b.pairs[:len(b.pairs)+1]
	c := &b.pairs[len(b.pairs)-1]
	c.v = value
	c.p.Name, c.p.Value = name, &c.v
	return &c.p
}

// levelPair is the pair level="l", one for each level of the scrape.
func (b *pageBuilder) levelPair(l int) *dto.LabelPair {
	p := b.levels[l]
	if p == nil {
		p = b.pair(&labelLevel, strconv.Itoa(l))
		b.levels[l] = p
	}
	return p
}

// value is a gauge of v: shared for the small integers that most
// per-site series are (levels, thresholds, states, counts).
func (b *pageBuilder) value(v float64) *dto.Gauge {
	small := v >= 0 && v < float64(len(b.small)) && v == float64(int(v)) && !math.Signbit(v)
	if small {
		if g := b.small[int(v)]; g != nil {
			return g
		}
	}
	if len(b.gauges) == cap(b.gauges) {
		b.gauges = make([]gaugeCell, 0, slab)
	}
	b.gauges = b.gauges[:len(b.gauges)+1]
	c := &b.gauges[len(b.gauges)-1]
	c.v = v
	c.g.Value = &c.v
	if small {
		b.small[int(v)] = &c.g
	}
	return &c.g
}

// gauge adds a series of value v and labels (in label name order) to mf.
func (b *pageBuilder) gauge(mf *dto.MetricFamily, v float64, labels ...*dto.LabelPair) {
	if len(b.metrics) == cap(b.metrics) {
		b.metrics = make([]dto.Metric, 0, slab)
	}
	if len(b.lists)+len(labels) > cap(b.lists) {
		b.lists = make([]*dto.LabelPair, 0, max(slab, len(labels)))
	}
	b.metrics = b.metrics[:len(b.metrics)+1]
	m := &b.metrics[len(b.metrics)-1]
	at := len(b.lists)
	b.lists = append(b.lists, labels...)
	m.Label = b.lists[at:len(b.lists):len(b.lists)]
	m.Gauge = b.value(v)
	mf.Metric = append(mf.Metric, m)
}
