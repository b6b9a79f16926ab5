package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// BodyVersion is the "version" field of a format = "json" body. It changes
// only when a field changes meaning or goes away; new fields may appear
// without a new version.
const BodyVersion = 1

// How long the alerts of the alertmanager format last; see the package
// documentation.
const (
	// EventAlertDuration is the endsAt of alerts for moments (switches,
	// failback available): Alertmanager notifies once and lets them resolve.
	EventAlertDuration = time.Hour
	// ConditionAlertDuration is the endsAt of VigilAllLevelsUnhealthy, a
	// safety net in case the resolution never arrives: vigil resolves it
	// itself when it sees the site recover.
	ConditionAlertDuration = 24 * time.Hour
)

// The alertname labels of the alertmanager format.
const (
	AlertAllLevelsUnhealthy = "VigilAllLevelsUnhealthy"
	AlertLevelSwitched      = "VigilOriginLevelSwitched"
	AlertFailbackAvailable  = "VigilFailbackAvailable"
)

// formatter turns a journal event into a webhook body. It reports false when
// the event has nothing to send. A formatter is used by one goroutine.
type formatter interface {
	body(e store.Event) ([]byte, bool, error)
}

func newFormatter(format string, o *options) (formatter, error) {
	switch format {
	case "json", "":
		return jsonFormat{originStates: o.originStates}, nil
	case "slack":
		return slackFormat{originStates: o.originStates}, nil
	case "alertmanager":
		return &alertmanagerFormat{externalURL: o.externalURL, resolved: map[string]bool{}}, nil
	}
	return nil, fmt.Errorf("format %q is not known; the formats are \"json\", \"slack\" and \"alertmanager\"", format)
}

// isNotice says whether an event is sent to json and slack webhooks.
func isNotice(k decide.EventKind, originStates bool) bool {
	return k != decide.KindOriginState || originStates
}

// JSONBody is the body of a format = "json" webhook: the notice, the body
// version, and the event as `vigil events -json` and the API show it.
type JSONBody struct {
	Version int `json:"version"`
	Notice
	Event decide.Event `json:"event"`
}

type jsonFormat struct{ originStates bool }

func (f jsonFormat) body(e store.Event) ([]byte, bool, error) {
	if !isNotice(e.Event.Kind, f.originStates) {
		return nil, false, nil
	}
	b, err := json.Marshal(JSONBody{Version: BodyVersion, Notice: NoticeOf(e), Event: e.Event})
	if err != nil {
		return nil, false, fmt.Errorf("encoding notice %d as json: %w", e.Seq, err)
	}
	return b, true, nil
}

// SlackBody is the body of a format = "slack" webhook: a Slack incoming
// webhook message. Text is the fallback shown in notifications; Blocks is
// the message itself.
type SlackBody struct {
	Text   string       `json:"text"`
	Blocks []SlackBlock `json:"blocks"`
}

// SlackBlock is a Slack Block Kit block (section or context).
type SlackBlock struct {
	Type     string      `json:"type"`
	Text     *SlackText  `json:"text,omitempty"`
	Elements []SlackText `json:"elements,omitempty"`
}

// SlackText is a Block Kit text object.
type SlackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var slackEmoji = map[string]string{
	SeverityCritical: ":rotating_light:",
	SeverityWarning:  ":warning:",
	SeverityInfo:     ":information_source:",
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

type slackFormat struct{ originStates bool }

func (f slackFormat) body(e store.Event) ([]byte, bool, error) {
	if !isNotice(e.Event.Kind, f.originStates) {
		return nil, false, nil
	}
	n := NoticeOf(e)
	title := slackEmoji[n.Severity] + " *" + slackEscape.Replace(n.Title) + "*"
	text := slackEscape.Replace(n.Text)
	ctx := fmt.Sprintf("site `%s` · %s · seq %d · %s", slackEscape.Replace(n.Site), n.Kind, n.Seq, n.Time.Format(time.RFC3339))
	body := SlackBody{
		Text: title + "\n" + text,
		Blocks: []SlackBlock{
			{Type: "section", Text: &SlackText{Type: "mrkdwn", Text: title + "\n" + text}},
			{Type: "context", Elements: []SlackText{{Type: "mrkdwn", Text: ctx}}},
		},
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, false, fmt.Errorf("encoding notice %d for slack: %w", e.Seq, err)
	}
	return b, true, nil
}

// Alert is one alert of the Alertmanager v2 API (POST /api/v2/alerts takes
// a list of them).
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// alertmanagerFormat keeps, per site, whether it knows that no
// VigilAllLevelsUnhealthy alert is firing, so that a recovering site is
// resolved once and not at every origin that turns healthy.
type alertmanagerFormat struct {
	externalURL string
	// resolved[site] is true when no alert is firing as far as this
	// process knows; absent means unknown (after a start).
	resolved map[string]bool
}

// recovers says whether an event shows that some level of its site is no
// longer unhealthy, which ends an all_levels_unhealthy condition.
func recovers(ev decide.Event) bool {
	switch ev.Kind {
	case decide.KindLevelSwitched:
		return ev.Reason == decide.ReasonFailover || ev.Reason == decide.ReasonFailback
	case decide.KindFailbackAvailable:
		return true
	case decide.KindOriginState:
		// An unhealthy origin turned healthy, or a disabled one enabled:
		// its level is no longer unhealthy. (unknown -> healthy is a start,
		// not a recovery.)
		return (ev.From == decide.Unhealthy && ev.To == decide.Healthy) ||
			(ev.From == decide.Disabled && ev.To == decide.Unknown)
	}
	return false
}

func (f *alertmanagerFormat) body(e store.Event) ([]byte, bool, error) {
	n := NoticeOf(e)
	var alerts []Alert
	switch e.Event.Kind {
	case decide.KindAllLevelsUnhealthy:
		a := f.alert(n, AlertAllLevelsUnhealthy, nil)
		a.EndsAt = n.Time.Add(ConditionAlertDuration)
		alerts = append(alerts, a)
		f.resolved[n.Site] = false
	case decide.KindLevelSwitched:
		a := f.alert(n, AlertLevelSwitched, map[string]string{
			"reason":     n.Reason,
			"from_level": strconv.Itoa(n.Levels.From),
			"to_level":   strconv.Itoa(n.Levels.To),
		})
		alerts = append(alerts, a)
	case decide.KindFailbackAvailable:
		alerts = append(alerts, f.alert(n, AlertFailbackAvailable, map[string]string{
			"level": strconv.Itoa(n.Levels.Available),
		}))
	}
	if recovers(e.Event) && !f.resolved[n.Site] {
		// Resolve: the same labels as the firing alert, ending now.
		a := f.alert(n, AlertAllLevelsUnhealthy, nil)
		a.Annotations = map[string]string{
			"summary":     TitleAllLevelsUnhealthy + " (resolved)",
			"description": fmt.Sprintf("Site %s has a level that is not unhealthy again.", n.Site),
			"seq":         strconv.FormatUint(n.Seq, 10),
		}
		a.EndsAt = a.StartsAt
		alerts = append(alerts, a)
		f.resolved[n.Site] = true
	}
	if len(alerts) == 0 {
		return nil, false, nil
	}
	b, err := json.Marshal(alerts)
	if err != nil {
		return nil, false, fmt.Errorf("encoding notice %d for alertmanager: %w", e.Seq, err)
	}
	return b, true, nil
}

// alert builds an event-style alert: it ends EventAlertDuration after it
// starts.
func (f *alertmanagerFormat) alert(n Notice, name string, extra map[string]string) Alert {
	labels := map[string]string{
		"alertname": name,
		"site":      n.Site,
		"severity":  n.Severity,
		"service":   "vigil",
	}
	if name == AlertAllLevelsUnhealthy {
		labels["severity"] = SeverityCritical
	}
	for k, v := range extra {
		labels[k] = v
	}
	ann := map[string]string{
		"summary":     n.Title,
		"description": n.Text,
		"seq":         strconv.FormatUint(n.Seq, 10),
	}
	if n.Actor != "" {
		ann["actor"] = n.Actor
	}
	a := Alert{Labels: labels, Annotations: ann, StartsAt: n.Time, EndsAt: n.Time.Add(EventAlertDuration)}
	if f.externalURL != "" {
		q := url.Values{"site": {n.Site}, "after": {strconv.FormatUint(n.Seq-1, 10)}}
		a.GeneratorURL = strings.TrimRight(f.externalURL, "/") + "/v1/events?" + q.Encode()
	}
	return a
}
