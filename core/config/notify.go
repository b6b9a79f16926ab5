package config

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

var webhookSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "url"}, {Name: "url_env"}, {Name: "url_file"}, {Name: "format"}, {Name: "timeout"},
		{Name: "events"}, {Name: "headers"}, {Name: "header_env"},
	},
}

var alertmanagerSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "urls", Required: true}, {Name: "installation"}, {Name: "resend_interval"},
		{Name: "external_url"}, {Name: "timeout"}, {Name: "headers"}, {Name: "header_env"},
	},
}

// eventKinds are the event kinds a webhook may ask for.
var eventKinds = []string{"origin_state", "level_switched", "failback_available", "all_levels_unhealthy", "origin_flapping", "path_partition_suspected", "drill_started", "drill_ended", "failover_timed", "ramp_step"}

func (l *loader) notify(b *hcl.Block) {
	kind, name := b.Labels[0], b.Labels[1]
	kinds := []string{NotifierWebhook, NotifierAlertmanager}
	if !slices.Contains(kinds, kind) {
		detail := fmt.Sprintf("Notifier kind %q is not known; the kinds are \"webhook\" and \"alertmanager\".", kind)
		if s := suggest(kind, kinds); s != "" {
			detail = fmt.Sprintf("Notifier kind %q is not known. Did you mean %q?", kind, s)
		}
		l.add(b.LabelRanges[0], "Unknown notifier kind", detail)
		return
	}
	if name == "" || strings.ContainsAny(name, "()/ ") {
		l.add(b.LabelRanges[1], "Invalid notifier name",
			fmt.Sprintf("Notifier name %q must be a plain word such as \"ops\" (no spaces, slashes or parentheses; \"(log)\" is reserved for the log).", name))
		return
	}
	if prev, ok := l.notifyAt[name]; ok {
		l.add(b.DefRange, "Duplicate notifier name",
			fmt.Sprintf("A notifier named %q was already declared at %s. Notifier names must be unique (they key the delivery cursor): rename or remove one of them.", name, prev))
		return
	}
	l.notifyAt[name] = b.DefRange
	n := &Notifier{Kind: kind, Name: name, Timeout: 10 * time.Second, DeclRange: b.DefRange}
	if kind == NotifierAlertmanager {
		l.alertmanager(b, n)
	} else {
		l.webhook(b, n)
	}
	l.cfg.Notifiers = append(l.cfg.Notifiers, n)
}

func (l *loader) webhook(b *hcl.Block, n *Notifier) {
	content, diags := b.Body.Content(webhookSchema)
	l.diags = append(l.diags, diags...)
	n.Format = "json"
	set := 0
	for _, a := range []string{"url", "url_env", "url_file"} {
		if content.Attributes[a] != nil {
			set++
		}
	}
	switch {
	case set == 0:
		l.add(b.DefRange, "Missing webhook url",
			`A webhook needs its URL: url = "https://hooks.example.com/vigil", or, for a URL that holds a secret, url_env = "VAR" (an environment variable) or url_file = "PATH".`)
	case set > 1:
		l.add(b.DefRange, "Conflicting webhook url",
			"Give one of url, url_env and url_file, not several.")
	}
	if attr := content.Attributes["url"]; attr != nil {
		var raw string
		if l.decode(attr, &raw) {
			if err := CheckWebhookURL(raw); err != nil {
				l.add(attr.Expr.Range(), "Invalid webhook url", "url "+err.Error()+`, such as "https://hooks.example.com/vigil".`)
			} else {
				n.URL = raw
			}
		}
	}
	l.nonEmptyIf(content.Attributes, "url_env", &n.URLEnv)
	l.pathAttr(content.Attributes, "url_file", &n.URLFile)
	if attr := content.Attributes["format"]; attr != nil {
		var f string
		if l.decode(attr, &f) {
			switch f {
			case "json", "slack":
				n.Format = f
			case "alertmanager":
				l.add(attr.Expr.Range(), "Alertmanager is a notifier of its own",
					`A webhook posts one body per event, which Alertmanager merges into earlier alerts and never resolves. Declare notify "alertmanager" "NAME" { urls = ["http://alertmanager:9093"] } instead: vigil then sends its alerts as states, resends them, and resolves them.`)
			default:
				l.add(attr.Expr.Range(), "Invalid webhook format",
					fmt.Sprintf("format must be \"json\" or \"slack\"; got %q.", f))
			}
		}
	}
	if attr := content.Attributes["events"]; attr != nil {
		var evs []string
		if l.decode(attr, &evs) {
			for _, e := range evs {
				if !slices.Contains(eventKinds, e) {
					detail := fmt.Sprintf("events lists %q, which is not an event kind; the kinds are %s.", e, strings.Join(eventKinds, ", "))
					if s := suggest(e, eventKinds); s != "" {
						detail += fmt.Sprintf(" Did you mean %q?", s)
					}
					l.add(attr.Expr.Range(), "Unknown event kind", detail)
					evs = nil
					break
				}
			}
			if evs != nil && len(evs) == 0 {
				l.add(attr.Expr.Range(), "No events", "events is empty, so the webhook would get nothing: list the kinds it should get, or remove the notifier.")
			}
			n.Events = evs
		}
	}
	l.notifyHeaders(content.Attributes, n)
	l.duration(content.Attributes, "timeout", &n.Timeout)
}

func (l *loader) alertmanager(b *hcl.Block, n *Notifier) {
	content, diags := b.Body.Content(alertmanagerSchema)
	l.diags = append(l.diags, diags...)
	n.ResendInterval = DefaultResendInterval
	n.Installation = "vigil"
	if attr := content.Attributes["urls"]; attr != nil {
		var urls []string
		if l.decode(attr, &urls) {
			if len(urls) == 0 {
				l.add(attr.Expr.Range(), "No Alertmanager", `urls lists no Alertmanager: give its base URL, such as ["http://alertmanager:9093"] (two for an HA pair).`)
			}
			for _, u := range urls {
				if err := CheckWebhookURL(u); err != nil {
					l.add(attr.Expr.Range(), "Invalid Alertmanager url", fmt.Sprintf("%q %v: give the Alertmanager's base URL such as \"http://alertmanager:9093\" (vigil posts to /api/v2/alerts under it).", u, err))
					urls = nil
					break
				}
			}
			n.URLs = urls
		}
	}
	if attr := content.Attributes["installation"]; attr != nil {
		var s string
		if l.decode(attr, &s) {
			if s == "" || strings.ContainsAny(s, "\"\\\n") {
				l.add(attr.Expr.Range(), "Invalid installation", "installation names this vigil in the alerts' vigil label: a plain word such as \"prod-eu\".")
			} else {
				n.Installation = s
			}
		}
	}
	if attr := content.Attributes["external_url"]; attr != nil {
		var s string
		if l.decode(attr, &s) {
			if err := CheckWebhookURL(s); err != nil {
				l.add(attr.Expr.Range(), "Invalid external_url", "external_url "+err.Error()+": the address operators reach vigil's status page at, such as \"https://vigil.example.com\".")
			} else {
				n.ExternalURL = strings.TrimSuffix(s, "/")
			}
		}
	}
	l.duration(content.Attributes, "resend_interval", &n.ResendInterval)
	l.duration(content.Attributes, "timeout", &n.Timeout)
	l.notifyHeaders(content.Attributes, n)
}

// notifyHeaders reads headers (values as written) and header_env (values
// from the environment at start).
func (l *loader) notifyHeaders(attrs hcl.Attributes, n *Notifier) {
	for _, name := range []string{"headers", "header_env"} {
		attr := attrs[name]
		if attr == nil {
			continue
		}
		var m map[string]string
		if !l.decode(attr, &m) {
			continue
		}
		for k, v := range m {
			if k == "" || strings.ContainsAny(k, " :\r\n") || http.CanonicalHeaderKey(k) == "Content-Type" || http.CanonicalHeaderKey(k) == "Content-Length" || http.CanonicalHeaderKey(k) == "Host" {
				l.add(attr.Expr.Range(), "Invalid header name", fmt.Sprintf("%s names header %q, which cannot be set: a header name is a word such as Authorization, and Content-Type, Content-Length and Host are vigil's.", name, k))
				m = nil
				break
			}
			if strings.ContainsAny(v, "\r\n") || (name == "header_env" && strings.TrimSpace(v) == "") {
				l.add(attr.Expr.Range(), "Invalid header value", fmt.Sprintf("%s gives header %q a value that is empty or spans lines.", name, k))
				m = nil
				break
			}
		}
		if name == "headers" {
			n.Headers = m
		} else {
			n.HeaderEnv = m
		}
	}
	for k := range n.Headers {
		for k2 := range n.HeaderEnv {
			if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(k2) {
				l.add(attrs["header_env"].Expr.Range(), "Header set twice", fmt.Sprintf("Header %q is in both headers and header_env: keep one.", k))
			}
		}
	}
}

// nonEmptyIf is nonEmpty for an optional attribute.
func (l *loader) nonEmptyIf(attrs hcl.Attributes, name string, into *string) {
	if attrs[name] != nil {
		l.nonEmpty(attrs, name, into)
	}
}

// CheckWebhookURL says what is wrong with a notifier URL: it must be an
// absolute http or https URL.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http or https URL")
	}
	return nil
}
