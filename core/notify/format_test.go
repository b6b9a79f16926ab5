package notify_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
)

// story is one incident: a failover, everything down, recovery, a manual
// failback, and a configuration reset.
func story() []store.Event {
	manual := switched(2, 1, decide.ReasonManual)
	manual.Actor = "alice"
	return []store.Event{
		originState("a1", decide.Healthy, decide.Unhealthy), // 1
		switched(1, 2, decide.ReasonFailover),               // 2
		levelEvent(decide.KindAllLevelsUnhealthy, 2),        // 3
		originState("a1", decide.Unhealthy, decide.Healthy), // 4
		levelEvent(decide.KindFailbackAvailable, 1),         // 5
		manual,                              // 6
		switched(3, 1, decide.ReasonConfig), // 7
	}
}

// deliverStory sends the story to one webhook of the format and returns the
// bodies it received.
func deliverStory(t *testing.T, format string, want int, opts ...notify.Option) []request {
	t.Helper()
	return deliverStoryTo(t, hook("h", "", format), want, opts...)
}

// hookWithEvents is a webhook of the format that gets the event kinds.
func hookWithEvents(format string, events ...string) *config.Notifier {
	n := hook("h", "", format)
	n.Events = events
	return n
}

// deliverStoryTo sends the story to the webhook n (its URL set here) and
// returns the bodies it received.
func deliverStoryTo(t *testing.T, n *config.Notifier, want int, opts ...notify.Option) []request {
	t.Helper()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	rc := newReceiver(t, nil)
	startAt(t, st, 0, "h")
	commit(t, st, story()...)
	n.URL = rc.URL + "/hook"
	d, err := notify.New(st, []*config.Notifier{n}, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	var got []request
	for range want {
		got = append(got, rc.next(t))
	}
	// Everything after the last body is skipped: the cursor reaches 7.
	eventually(t, "cursor at the end of the journal", func() bool { return cursor(t, st, "h") == 7 })
	if n := len(rc.got); n != 0 {
		t.Fatalf("%d more requests than the %d expected", n, want)
	}
	for _, r := range got {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		if r.Header.Get("Idempotency-Key") == "" {
			t.Errorf("no Idempotency-Key")
		}
	}
	return got
}

func TestJSONBody(t *testing.T) {
	t.Parallel()
	type want struct {
		seq      uint64
		kind     string
		reason   string
		severity string
		title    string
		levels   notify.Levels
		actor    string
		text     []string
	}
	notices := []want{
		{2, "level_switched", "failover", "warning", notify.TitleSwitchedAutomatically, notify.Levels{From: 1, To: 2, Current: 2}, "", []string{"from level 1 to level 2", "failover"}},
		{3, "all_levels_unhealthy", "", "critical", notify.TitleAllLevelsUnhealthy, notify.Levels{Current: 2}, "", []string{"every origin level is unhealthy", "level 2"}},
		{5, "failback_available", "", "info", notify.TitleFailbackAvailable, notify.Levels{Available: 1}, "", []string{"level 1 is healthy again", "vigil switch www.example.com 1"}},
		{6, "level_switched", "manual", "info", notify.TitleSwitchedManually, notify.Levels{From: 2, To: 1, Current: 1}, "alice", []string{"from level 2 to level 1", "by alice", "at 2026-05-01T10:00:06Z"}},
		{7, "level_switched", "config", "warning", notify.TitleResetByConfig, notify.Levels{From: 3, To: 1, Current: 1}, "", []string{"from level 3 to level 1", "no longer has level 3"}},
	}
	check := func(t *testing.T, r request, w want) {
		t.Helper()
		var b notify.JSONBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
		if b.Version != 1 || b.Seq != w.seq || b.Kind != w.kind || b.Reason != w.reason || b.Severity != w.severity ||
			b.Title != w.title || b.Levels != w.levels || b.Actor != w.actor || b.Site != "www.example.com" ||
			!b.Time.Equal(t0.Add(time.Duration(w.seq)*time.Second)) || b.Event.Kind.String() != w.kind {
			t.Errorf("body %s\ndoes not match %+v", r.Body, w)
		}
		for _, s := range w.text {
			if !strings.Contains(b.Text, s) {
				t.Errorf("text %q lacks %q", b.Text, s)
			}
		}
	}
	t.Run("level events only by default", func(t *testing.T) {
		t.Parallel()
		got := deliverStory(t, "json", len(notices))
		for i, w := range notices {
			check(t, got[i], w)
		}
	})
	t.Run("origin states when the webhook lists them", func(t *testing.T) {
		t.Parallel()
		got := deliverStoryTo(t, hookWithEvents("json", "origin_state", "level_switched", "failback_available", "all_levels_unhealthy"), 7)
		var b notify.JSONBody
		if err := json.Unmarshal(got[0].Body, &b); err != nil {
			t.Fatal(err)
		}
		if b.Seq != 1 || b.Title != notify.TitleOriginState || b.Origin == nil || *b.Origin != (notify.OriginChange{Name: "a1", From: "healthy", To: "unhealthy"}) || b.Severity != "warning" {
			t.Errorf("origin_state body %s", got[0].Body)
		}
		check(t, got[1], notices[0])
	})
}

func TestSlackBody(t *testing.T) {
	t.Parallel()
	got := deliverStory(t, "slack", 5)
	titles := []string{notify.TitleSwitchedAutomatically, notify.TitleAllLevelsUnhealthy, notify.TitleFailbackAvailable, notify.TitleSwitchedManually, notify.TitleResetByConfig}
	seqs := []string{"seq 2", "seq 3", "seq 5", "seq 6", "seq 7"}
	for i, r := range got {
		var b notify.SlackBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
		if !strings.Contains(b.Text, "*"+titles[i]+"*") {
			t.Errorf("text %q lacks the title %q", b.Text, titles[i])
		}
		if len(b.Blocks) != 2 || b.Blocks[0].Type != "section" || b.Blocks[0].Text == nil || b.Blocks[0].Text.Type != "mrkdwn" ||
			!strings.Contains(b.Blocks[0].Text.Text, titles[i]) || b.Blocks[1].Type != "context" || len(b.Blocks[1].Elements) != 1 ||
			!strings.Contains(b.Blocks[1].Elements[0].Text, seqs[i]) || !strings.Contains(b.Blocks[1].Elements[0].Text, "www.example.com") {
			t.Errorf("blocks of %s", r.Body)
		}
	}
	if !strings.Contains(string(got[3].Body), "by alice") {
		t.Errorf("manual switch without its actor: %s", got[3].Body)
	}
}
