package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
)

// TestDrillNotices: a drill's own events and the events made during it
// are marked as the drill's, in the notice's field and its text; a real
// event is not.
func TestDrillNotices(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		ev    store.Event
		drill bool
		text  string
	}{
		{"started", store.Event{Site: "www", Actor: "alice", Time: at, Event: decide.Event{Kind: decide.KindDrillStarted, Level: 1, Seconds: 300}}, true,
			"Drill: Site www: alice started a failover drill of level 1 for 5m0s"},
		{"ended, stepped aside", store.Event{Site: "www", Time: at, Event: decide.Event{Kind: decide.KindDrillEnded, Level: 1, End: decide.DrillEndSteppedAside}}, true,
			"Drill: Site www: the failover drill of level 1 ended: another level of the site really failed"},
		{"failover during a drill", store.Event{Site: "www", Time: at, Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover, Drill: true}}, true,
			"Drill: Site www switched from level 1 to level 2 (failover"},
		{"a real failover", store.Event{Site: "www", Time: at, Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover}}, false,
			"Site www switched from level 1 to level 2 (failover"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := notify.NoticeOf(c.ev)
			if n.Drill != c.drill || !strings.HasPrefix(n.Text, c.text) {
				t.Errorf("notice drill %v, text %q; want drill %v, text starting %q", n.Drill, n.Text, c.drill, c.text)
			}
		})
	}
}
