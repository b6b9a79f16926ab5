package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// BodyVersion is the "version" field of a format = "json" body. It changes
// only when a field changes meaning or goes away; new fields may appear
// without a new version.
const BodyVersion = 1

// formatter turns a journal event into a webhook body. It reports false when
// the event has nothing to send. A formatter is used by one goroutine.
type formatter interface {
	body(e store.Event) ([]byte, bool, error)
}

func newFormatter(format string) (formatter, error) {
	switch format {
	case "json", "":
		return jsonFormat{}, nil
	case "slack":
		return slackFormat{}, nil
	}
	return nil, fmt.Errorf("format %q is not known; the formats are \"json\" and \"slack\" (Alertmanager is a notifier of its own)", format)
}

// JSONBody is the body of a format = "json" webhook: the notice, the body
// version, and the event as `vigil events -json` and the API show it.
type JSONBody struct {
	Version int `json:"version"`
	Notice
	Event decide.Event `json:"event"`
}

type jsonFormat struct{}

func (f jsonFormat) body(e store.Event) ([]byte, bool, error) {
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

type slackFormat struct{}

func (f slackFormat) body(e store.Event) ([]byte, bool, error) {
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
