package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	cleanhttp "github.com/hashicorp/go-cleanhttp"

	"github.com/vigilcdn/vigil/core/config"
)

// The alertname labels of the alerts vigil sends to Alertmanager. Each is
// a state: it fires while the state lasts and is resolved when it ends.
const (
	// AlertSiteOnBackupLevel fires while a site is off its top level.
	AlertSiteOnBackupLevel = "VigilSiteOnBackupLevel"
	// AlertAllLevelsUnhealthy fires while every level of a site is
	// unhealthy.
	AlertAllLevelsUnhealthy = "VigilAllLevelsUnhealthy"
	// AlertFailbackAvailable fires while a higher level is healthy and a
	// manual failback (configured, or a manual hold) waits for someone.
	AlertFailbackAvailable = "VigilFailbackAvailable"
	// AlertOriginUnhealthy fires while an origin is unhealthy.
	AlertOriginUnhealthy = "VigilOriginUnhealthy"
	// AlertOriginFlapping fires while an origin is held out as flapping.
	AlertOriginFlapping = "VigilOriginFlapping"
)

// alertLifetimes is how many resend intervals ahead an alert's endsAt is:
// an Alertmanager that misses a few sends keeps the alert firing, as
// Prometheus's alerts do.
const alertLifetimes = 4

// alertBatch is how many alerts one POST carries.
const alertBatch = 500

// minAlertGap is the least time between two sends of one notifier: a burst
// of commits is one send.
const minAlertGap = time.Second

// SiteAlerts is what the alert sender needs of one site that is in some
// alerting state.
type SiteAlerts struct {
	Site string
	// Level is the current level; TopLevel the site's first.
	Level, TopLevel int
	// AllUnhealthy is set while every level of the site is unhealthy.
	AllUnhealthy bool
	// FailbackLevel is a healthy level above Level that a manual failback
	// could go to, while failback is manual (configured, or a manual
	// hold); 0 for none.
	FailbackLevel int
	// ManualHold is set while a manual switch holds the site.
	ManualHold bool
	// Unhealthy are the site's unhealthy origins.
	Unhealthy []UnhealthyOrigin
	// Flapping are the origins held out as flapping.
	Flapping []UnhealthyOrigin
	// Drill is set while a failover drill runs on the site or the site is
	// on its way back from one: every alert of the site is labelled
	// drill="true" (docs/drills.md).
	Drill bool
}

// UnhealthyOrigin is an unhealthy origin and since when.
type UnhealthyOrigin struct {
	Name  string
	Level int
	Since time.Time
}

// AlertStates calls yield for every site in an alerting state, from the
// engine's read side.
type AlertStates func(yield func(SiteAlerts))

// WithAlertStates is where the Alertmanager notifiers read the states they
// alert on. Without it they send nothing.
func WithAlertStates(src AlertStates) Option { return func(o *options) { o.states = src } }

// Alert is one alert of the Alertmanager v2 API (POST /api/v2/alerts takes
// a list of them).
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// fingerprint identifies an alert by its labels, as Alertmanager does.
func (a *Alert) fingerprint() string {
	keys := make([]string, 0, len(a.Labels))
	for k := range a.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(a.Labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// alertSender sends one Alertmanager notifier's alerts: every active one
// at every resend interval (and soon after a change), and each resolved
// one for a few intervals after its state ended. It is used by its
// worker's goroutine only.
type alertSender struct {
	n       *config.Notifier
	opts    *options
	client  *http.Client
	headers http.Header
	d       *Dispatcher

	active   map[string]*Alert
	resolved map[string]resolvedAlert
	lastSend time.Time
	failing  map[string]bool // Alertmanager URL → its last send failed
}

type resolvedAlert struct {
	alert *Alert
	until time.Time
}

func newAlertSender(d *Dispatcher, n *config.Notifier) (*alertSender, error) {
	headers, err := notifierHeaders(n)
	if err != nil {
		return nil, err
	}
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &alertSender{
		n: n, opts: &d.opts, d: d, headers: headers,
		client: &http.Client{Transport: cleanhttp.DefaultPooledTransport(), Timeout: timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		active: map[string]*Alert{}, resolved: map[string]resolvedAlert{}, failing: map[string]bool{},
	}, nil
}

func (s *alertSender) resend() time.Duration {
	if s.n.ResendInterval > 0 {
		return s.n.ResendInterval
	}
	return config.DefaultResendInterval
}

// runAlerts is an Alertmanager notifier's loop: send, then wait for the
// resend interval or a wake.
func (d *Dispatcher) runAlerts(ctx context.Context, w *worker) {
	defer close(w.done)
	s := w.alerts
	defer s.client.CloseIdleConnections()
	tick := time.NewTicker(s.resend())
	defer tick.Stop()
	for {
		var changed <-chan struct{} // nil (never ready) without a Control
		if s.opts.control != nil {
			changed = s.opts.control.watch()
		}
		s.send(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			continue
		case <-changed:
		case <-w.wake:
		}
		// A burst of wakes and changes is one send.
		if gap := minAlertGap - s.opts.now().Sub(s.lastSend); gap > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// send computes the alerts of now and posts them to every Alertmanager.
func (s *alertSender) send(ctx context.Context) {
	now := s.opts.now()
	s.lastSend = now
	current := s.current(now)
	ends := now.Add(alertLifetimes * s.resend())
	for fp, a := range current {
		if prev := s.active[fp]; prev != nil {
			a.StartsAt = prev.StartsAt
		}
		a.EndsAt = ends
		delete(s.resolved, fp)
	}
	for fp, a := range s.active {
		if _, still := current[fp]; !still {
			r := *a
			r.EndsAt = now
			s.resolved[fp] = resolvedAlert{alert: &r, until: now.Add(alertLifetimes * s.resend())}
		}
	}
	s.active = current
	all := make([]*Alert, 0, len(current)+len(s.resolved))
	for _, a := range current {
		all = append(all, a)
	}
	for fp, r := range s.resolved {
		if now.After(r.until) {
			delete(s.resolved, fp)
			continue
		}
		all = append(all, r.alert)
	}
	if len(all) == 0 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].fingerprint() < all[j].fingerprint() })
	for _, base := range s.n.URLs {
		if ctx.Err() != nil {
			return
		}
		s.post(ctx, base, all)
	}
}

// post sends alerts to one Alertmanager, in batches. A failure is logged
// (once until it works again) and counted; the next send carries the
// same states, so nothing is lost but time.
func (s *alertSender) post(ctx context.Context, base string, alerts []*Alert) {
	endpoint := strings.TrimSuffix(base, "/") + "/api/v2/alerts"
	log := s.d.log.With("notifier", s.n.Name, "target", target(base))
	for i := 0; i < len(alerts); i += alertBatch {
		batch := alerts[i:min(i+alertBatch, len(alerts))]
		body, err := json.Marshal(batch)
		if err != nil {
			log.Error("cannot encode the alerts", "error", err)
			return
		}
		err = s.postBatch(ctx, endpoint, body)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.d.metrics.retries.WithLabelValues(s.n.Name).Inc()
			if !s.failing[base] {
				log.Warn("cannot send the alerts to Alertmanager; sending them again at the next interval", "error", err, "alerts", len(alerts), "resend_interval", s.resend().String())
			}
			s.failing[base] = true
			return
		}
	}
	s.d.metrics.deliveries.WithLabelValues(s.n.Name, "delivered").Add(float64(len(alerts)))
	if s.failing[base] {
		log.Info("alerts reach Alertmanager again", "alerts", len(alerts))
	}
	s.failing[base] = false
}

func (s *alertSender) postBatch(ctx context.Context, endpoint string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, vs := range s.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if ok := asURLError(err, &ue); ok {
			return ue.Err // without the URL, which may hold credentials
		}
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(snippet)))
	}
	return nil
}

func asURLError(err error, into **url.Error) bool {
	ue, ok := err.(*url.Error)
	if ok {
		*into = ue
	}
	return ok
}

// current is the alerts of the states now, by fingerprint.
func (s *alertSender) current(now time.Time) map[string]*Alert {
	out := map[string]*Alert{}
	add := func(a *Alert) { out[a.fingerprint()] = a }
	s.controlAlerts(add)
	if s.opts.states == nil {
		return out
	}
	s.opts.states(func(st SiteAlerts) {
		if st.Level != st.TopLevel && st.TopLevel != 0 {
			a := s.alert(AlertSiteOnBackupLevel, st, now, SeverityWarning,
				fmt.Sprintf("Site %s is off its top level", st.Site),
				fmt.Sprintf("Site %s serves from level %d, not from its top level %d.", st.Site, st.Level, st.TopLevel))
			switch {
			case st.ManualHold:
				a.Annotations["description"] += " A manual switch holds it there."
				a.Annotations["command"] = fmt.Sprintf("vigil switch %s %d", st.Site, st.TopLevel)
			case st.FailbackLevel != 0:
				a.Annotations["command"] = fmt.Sprintf("vigil switch %s %d", st.Site, st.FailbackLevel)
			}
			add(a)
		}
		if st.AllUnhealthy {
			add(s.alert(AlertAllLevelsUnhealthy, st, now, SeverityCritical,
				fmt.Sprintf("Every level of site %s is unhealthy", st.Site),
				fmt.Sprintf("Every origin level of site %s is unhealthy; it stays on level %d. Visitors may get errors.", st.Site, st.Level)))
		}
		if st.FailbackLevel != 0 {
			a := s.alert(AlertFailbackAvailable, st, now, SeverityInfo,
				fmt.Sprintf("Site %s can fail back to level %d", st.Site, st.FailbackLevel),
				fmt.Sprintf("Level %d of site %s is healthy again; failback is manual, so the site stays on level %d until someone switches it.", st.FailbackLevel, st.Site, st.Level))
			a.Annotations["command"] = fmt.Sprintf("vigil switch %s %d", st.Site, st.FailbackLevel)
			add(a)
		}
		for _, o := range st.Flapping {
			a := s.alert(AlertOriginFlapping, st, now, SeverityWarning,
				fmt.Sprintf("Origin %s of site %s is flapping", o.Name, st.Site),
				fmt.Sprintf("Origin %s (level %d) of site %s changed state too often; it is held unhealthy until it has been stable for the flap rule's window.", o.Name, o.Level, st.Site))
			a.Labels["origin"] = o.Name
			a.Labels["level"] = strconv.Itoa(o.Level)
			a.Annotations["command"] = "vigil status " + st.Site
			if !o.Since.IsZero() {
				a.StartsAt = o.Since
			}
			add(a)
		}
		for _, o := range st.Unhealthy {
			a := s.alert(AlertOriginUnhealthy, st, now, SeverityWarning,
				fmt.Sprintf("Origin %s of site %s is unhealthy", o.Name, st.Site),
				fmt.Sprintf("Origin %s (level %d) of site %s is unhealthy.", o.Name, o.Level, st.Site))
			a.Labels["origin"] = o.Name
			a.Labels["level"] = strconv.Itoa(o.Level)
			a.Annotations["command"] = "vigil probe " + st.Site
			if !o.Since.IsZero() {
				a.StartsAt = o.Since
			}
			add(a)
		}
	})
	return out
}

func (s *alertSender) alert(name string, st SiteAlerts, now time.Time, severity, summary, description string) *Alert {
	a := &Alert{
		Labels: map[string]string{
			"alertname": name,
			"site":      st.Site,
			"level":     strconv.Itoa(st.Level),
			"vigil":     s.n.Installation,
			"severity":  severity,
		},
		Annotations: map[string]string{"summary": summary, "description": description},
		StartsAt:    now,
	}
	if a.Labels["vigil"] == "" {
		a.Labels["vigil"] = "vigil"
	}
	if st.Drill {
		a.Labels["drill"] = "true"
	}
	if base := s.externalURL(); base != "" {
		a.GeneratorURL = base + "/#/site/" + url.PathEscape(st.Site)
	}
	return a
}

func (s *alertSender) externalURL() string {
	if s.n.ExternalURL != "" {
		return s.n.ExternalURL
	}
	if s.opts.externalURL != nil {
		return strings.TrimSuffix(s.opts.externalURL(), "/")
	}
	return ""
}
