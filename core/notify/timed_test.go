package notify_test

import (
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
)

// TestTimedAndRampNotices: the agent's own events, failover_timed and
// ramp_step, are worded from their fields, and a report that cannot be
// read says so rather than failing the notice.
func TestTimedAndRampNotices(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	report := `{"site":"www","from_level":1,"to_level":2,"detect_seconds":61.2,"publish_seconds":0.004,"edge_seconds":0.031,` +
		`"nodes":[{"node":"n1","reported":true},{"node":"n2","reported":false}]}`
	for _, c := range []struct {
		name, title, text string
		ev                decide.Event
	}{
		{"failover timed", "Failover timed",
			"Site www: the failover from level 1 to 2 took detect 61.200s, publish 0.004s, edges 0.031s (1 of 2 nodes reported); vigil failovers www shows each node.",
			decide.Event{Kind: decide.KindFailoverTimed, Report: report}},
		{"a report that cannot be read", "Failover timed",
			"Site www: a failover was timed, but its report cannot be read (unexpected end of JSON input); see vigil failovers www.",
			decide.Event{Kind: decide.KindFailoverTimed, Report: `{"site":`}},
		{"ramp step", "Failback ramp step",
			"Site www: the failback ramp gives level 1 25% of new requests, level 2 the rest.",
			decide.Event{Kind: decide.KindRampStep, Level: 1, FromLevel: 2, Weight: 25}},
		{"ramp done", "Failback ramp step",
			"Site www: the failback ramp to level 1 is complete: it gets every new request.",
			decide.Event{Kind: decide.KindRampStep, Level: 1, FromLevel: 2, Weight: 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := notify.NoticeOf(store.Event{Site: "www", Time: at, Event: c.ev})
			if n.Title != c.title || n.Text != c.text || n.Severity != notify.SeverityInfo {
				t.Errorf("notice %q (%s): %q\nwant %q (info): %q", n.Title, n.Severity, n.Text, c.title, c.text)
			}
		})
	}
}
