package notify_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
)

// fast makes the backoff short, so that a honoured Retry-After stands out.
var fast = notify.WithRetryWait(10*time.Millisecond, 50*time.Millisecond)

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		header func() string
		// earliest returns the earliest allowed time of the second attempt.
		earliest func(first request) time.Time
		from     string
	}{
		{
			name: "429 with delay-seconds", status: http.StatusTooManyRequests,
			header:   func() string { return "1" },
			earliest: func(first request) time.Time { return first.At.Add(time.Second) },
			from:     "retry-after",
		},
		{
			name: "503 with an HTTP date", status: http.StatusServiceUnavailable,
			header: func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) },
			earliest: func(first request) time.Time {
				at, _ := http.ParseTime(first.Header.Get("X-Test-Retry-After"))
				return at
			},
			from: "retry-after",
		},
		{
			name: "503 without Retry-After backs off", status: http.StatusServiceUnavailable,
			header:   func() string { return "" },
			earliest: func(first request) time.Time { return first.At.Add(5 * time.Millisecond) },
			from:     "backoff",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, t.TempDir(), 0)
			t.Cleanup(func() { st.Close() })
			var mu sync.Mutex
			sent := ""
			rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, req request, n int) {
				if n == 1 {
					mu.Lock()
					sent = tt.header()
					mu.Unlock()
					if sent != "" {
						w.Header().Set("Retry-After", sent)
					}
					w.WriteHeader(tt.status)
				}
			})
			startAt(t, st, 0, "h")
			commit(t, st, switched(1, 2, decide.ReasonFailover))
			lb, logger := newLog()
			d, err := notify.New(st, []*config.Notifier{hook("h", rc.URL, "json")}, logger, fast)
			if err != nil {
				t.Fatal(err)
			}
			run(t, d)
			first, second := rc.next(t), rc.next(t)
			mu.Lock()
			first.Header.Set("X-Test-Retry-After", sent)
			mu.Unlock()
			if earliest := tt.earliest(first); second.At.Before(earliest) {
				t.Errorf("second attempt at %s, %s after the first; Retry-After %q allows it at %s at the earliest",
					second.At.Format(time.StampMilli), second.At.Sub(first.At), sent, earliest.Format(time.StampMilli))
			}
			if second.Seq != 1 || first.Seq != 1 {
				t.Errorf("attempts carried seq %d and %d, want 1 twice", first.Seq, second.Seq)
			}
			lb.WaitFor(t, wait, "retrying", `"wait_from":"`+tt.from+`"`, `"attempt":1`)
			eventually(t, "delivered", func() bool { return cursor(t, st, "h") == 1 })
			if got := metric(t, d, "vigil_notify_retries_total", map[string]string{"notifier": "h"}); got != 1 {
				t.Errorf("retries metric %v, want 1", got)
			}
			if got := metric(t, d, "vigil_notify_deliveries_total", map[string]string{"notifier": "h", "outcome": "delivered"}); got != 1 {
				t.Errorf("delivered metric %v, want 1", got)
			}
		})
	}
}

// TestAtLeastOnceAcrossRestart stops the agent while a notice is failing or
// in flight, starts a new dispatcher on the reopened store, and checks that
// every notice arrives, in order, with at most the one in flight twice.
func TestAtLeastOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		hang bool // the receiver takes notice 5 and never answers
		dups int
	}{
		{"receiver failing", false, 0},
		{"receiver hangs on the notice in flight", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st := openStore(t, dir, 0)
			startAt(t, st, 0, "h")
			var events []store.Event
			for i := range 10 {
				events = append(events, switched(1+i%2, 2-i%2, decide.ReasonFailover))
				if i%3 == 0 {
					events = append(events, originState("a1", decide.Healthy, decide.Unhealthy))
				}
			}
			var notices []uint64
			committed := commit(t, st, events...)
			end := committed[len(committed)-1].Seq
			for _, e := range committed {
				if e.Event.Kind != decide.KindOriginState {
					notices = append(notices, e.Seq)
				}
			}

			var (
				mu       sync.Mutex
				accepted []uint64 // processed by the receiver, in order
				healthy  bool
				fifth    = make(chan struct{}, 100)
				last     = make(chan struct{}, 1)
			)
			rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, req request, _ int) {
				mu.Lock()
				ok := healthy || req.Seq < notices[4]
				if ok || tt.hang {
					accepted = append(accepted, req.Seq)
				}
				mu.Unlock()
				if req.Seq == notices[len(notices)-1] && ok {
					last <- struct{}{}
				}
				if ok {
					return
				}
				fifth <- struct{}{}
				if tt.hang {
					<-r.Context().Done()
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			d, err := notify.New(st, []*config.Notifier{hook("h", rc.URL, "json")}, nil, fast)
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, d)
			for range 2 { // two attempts at notice 5 (or one that hangs)
				select {
				case <-fifth:
				case <-time.After(wait):
					t.Fatal("notice 5 never reached the receiver")
				}
				if tt.hang {
					break
				}
			}
			stop()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			st = openStore(t, dir, 0)
			t.Cleanup(func() { st.Close() })
			// The last notice acknowledged, and the origin_state after it.
			if got := cursor(t, st, "h"); got != notices[4]-1 {
				t.Fatalf("stored cursor %d after the stop, want %d", got, notices[4]-1)
			}
			mu.Lock()
			healthy = true
			mu.Unlock()
			d, err = notify.New(st, []*config.Notifier{hook("h", rc.URL, "json")}, nil, fast)
			if err != nil {
				t.Fatal(err)
			}
			run(t, d)
			select {
			case <-last:
			case <-time.After(wait):
				t.Fatal("the last notice never arrived after the restart")
			}
			eventually(t, "cursor at the end", func() bool { return cursor(t, st, "h") == end })

			mu.Lock()
			defer mu.Unlock()
			if !slices.IsSorted(accepted) {
				t.Errorf("out of order: %v", accepted)
			}
			if got := slices.Compact(slices.Clone(accepted)); !slices.Equal(got, notices) {
				t.Errorf("received %v, want every notice %v", accepted, notices)
			}
			if dups := len(accepted) - len(notices); dups != tt.dups {
				t.Errorf("%d duplicates in %v, want %d", dups, accepted, tt.dups)
			}
		})
	}
}

func TestDownWebhookDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	down := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ request, _ int) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	rejects := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ request, _ int) {
		http.Error(w, "bad payload", http.StatusBadRequest)
	})
	ok := newReceiver(t, nil)
	startAt(t, st, 0, "down", "rejects", "ok")
	for range 5 {
		commit(t, st, switched(1, 2, decide.ReasonFailover))
	}
	lb, logger := newLog()
	d, err := notify.New(st, []*config.Notifier{
		hook("down", down.URL, "json"), hook("rejects", rejects.URL, "json"), hook("ok", ok.URL, "slack"),
	}, logger, fast)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	for range 5 {
		ok.next(t)
		d.Wake() // never blocks, whatever the webhooks do
	}
	eventually(t, "ok's cursor at 5", func() bool { return cursor(t, st, "ok") == 5 })
	eventually(t, "rejects' cursor at 5", func() bool { return cursor(t, st, "rejects") == 5 })
	for range 5 {
		if r := rejects.next(t); r.Seq == 0 {
			t.Errorf("rejects got a body without seq: %s", r.Body)
		}
	}
	if n := len(rejects.got); n != 0 {
		t.Errorf("a 400 was retried: %d extra requests", n)
	}
	if got := metric(t, d, "vigil_notify_deliveries_total", map[string]string{"notifier": "rejects", "outcome": "rejected"}); got != 5 {
		t.Errorf("rejected metric %v, want 5", got)
	}
	lb.WaitFor(t, wait, "webhook rejected the notice", `"notifier":"rejects"`, `"status":"400 Bad Request"`, `"response":"bad payload"`)
	down.next(t)
	down.next(t)
	if got := cursor(t, st, "down"); got != 0 {
		t.Errorf("the down webhook's cursor moved to %d", got)
	}
	if got := metric(t, d, "vigil_notify_lag_events", map[string]string{"notifier": "down"}); got != 5 {
		t.Errorf("lag of the down webhook %v, want 5", got)
	}
	if got := metric(t, d, "vigil_notify_lag_events", map[string]string{"notifier": "ok"}); got != 0 {
		t.Errorf("lag of the ok webhook %v, want 0", got)
	}
}

func TestURLSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	echo := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ request, _ int) {
		http.Error(w, "no such hook: "+r.URL.String(), http.StatusNotFound)
	})
	closed := newReceiver(t, nil)
	closed.Close()
	secrets := []string{"T0SECRETPATH", "B1SECRET", "QSECRET99", "SECRETDOWN", "KEYSECRET", "pa55word"}
	notifiers := []*config.Notifier{
		hook("echo", echo.URL+"/services/T0SECRETPATH/B1SECRET?token=QSECRET99", "slack"),
		hook("down", strings.Replace(closed.URL, "http://", "http://user:pa55word@", 1)+"/hooks/SECRETDOWN?key=KEYSECRET", "json"),
	}
	startAt(t, st, 0, "echo", "down", notify.LogName)
	commit(t, st, levelEvent(decide.KindAllLevelsUnhealthy, 1))
	lb, logger := newLog()
	d, err := notify.New(st, notifiers, logger, fast)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	lb.WaitFor(t, wait, "webhook rejected the notice", `"notifier":"echo"`, `"target":"`+echo.URL+`"`, "no such hook")
	lb.WaitFor(t, wait, "retrying", `"notifier":"down"`, `"target":"`+closed.URL+`"`, "connection refused")
	lb.WaitFor(t, wait, notify.TitleAllLevelsUnhealthy, `"@level":"error"`, `"site":"www.example.com"`)

	_, err = notify.New(st, []*config.Notifier{hook("bad", "ftp://files.example.com/SECRETDOWN", "json")}, nil)
	if err == nil {
		t.Fatal("an ftp url was accepted")
	}
	for _, s := range secrets {
		if strings.Contains(lb.String(), s) {
			t.Errorf("the log holds the secret %q:\n%s", s, lb.String())
		}
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error %q holds the secret %q", err, s)
		}
	}
}

func TestWakeDeliversWithoutPolling(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	rc := newReceiver(t, nil)
	startAt(t, st, 0, "h")
	commit(t, st, switched(1, 2, decide.ReasonFailover))
	d, err := notify.New(st, []*config.Notifier{hook("h", rc.URL, "json")}, nil, notify.WithSafetyInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	if r := rc.next(t); r.Seq != 1 {
		t.Fatalf("first notice seq %d", r.Seq)
	}
	// The notifier is idle now; only Wake can bring it the next event.
	commit(t, st, levelEvent(decide.KindFailbackAvailable, 1))
	d.Wake()
	if r := rc.next(t); r.Seq != 2 {
		t.Fatalf("second notice seq %d", r.Seq)
	}
}

func TestNewNotifierStartsAtTheEnd(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	rc := newReceiver(t, nil)
	commit(t, st, switched(1, 2, decide.ReasonFailover), switched(2, 1, decide.ReasonFailback))
	lb, logger := newLog()
	d, err := notify.New(st, []*config.Notifier{hook("h", rc.URL, "json")}, logger)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	lb.WaitFor(t, wait, "new notifier", `"notifier":"h"`, `"after_seq":2`)
	lb.WaitFor(t, wait, "new notifier", `"notifier":"(log)"`)
	if got := cursor(t, st, "h"); got != 2 {
		t.Fatalf("a new notifier's starting place is not stored: cursor %d", got)
	}
	commit(t, st, levelEvent(decide.KindAllLevelsUnhealthy, 1))
	d.Wake()
	if r := rc.next(t); r.Seq != 3 {
		t.Fatalf("a new notifier got seq %d first, want 3 (history is not replayed)", r.Seq)
	}
	// The log got it too (its own cursor started at the end as well).
	lb.WaitFor(t, wait, notify.TitleAllLevelsUnhealthy, `"seq":3`)
	if strings.Contains(lb.String(), `"seq":1`) {
		t.Errorf("history was logged:\n%s", lb.String())
	}
}

func TestFallingBehindTheJournalIsLogged(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 5) // keeps the newest 5 events
	t.Cleanup(func() { st.Close() })
	rc := newReceiver(t, nil)
	startAt(t, st, 0, "h", notify.LogName)
	for range 10 {
		commit(t, st, switched(1, 2, decide.ReasonFailover))
	}
	lb, logger := newLog()
	d, err := notify.New(st, []*config.Notifier{hook("h", rc.URL, "json")}, logger)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	for want := uint64(6); want <= 10; want++ {
		if r := rc.next(t); r.Seq != want {
			t.Fatalf("got seq %d, want %d", r.Seq, want)
		}
	}
	lb.WaitFor(t, wait, "notices lost", `"notifier":"h"`, `"lost_events":5`, `"first_lost_seq":1`, `"last_lost_seq":5`)
	lb.WaitFor(t, wait, "notices lost", `"notifier":"(log)"`, `"lost_events":5`)
	if got := metric(t, d, "vigil_notify_lost_events_total", map[string]string{"notifier": "h"}); got != 5 {
		t.Errorf("lost metric %v, want 5", got)
	}
}

func TestReconfigure(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	a, b := newReceiver(t, nil), newReceiver(t, nil)
	startAt(t, st, 0, "a", "b")
	commit(t, st, switched(1, 2, decide.ReasonFailover))
	d, err := notify.New(st, []*config.Notifier{hook("a", a.URL, "json")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	a.next(t)
	eventually(t, "a's cursor at 1", func() bool { return cursor(t, st, "a") == 1 })

	tests := []struct {
		name      string
		notifiers []*config.Notifier
		wantErr   string
	}{
		{"duplicate names are refused", []*config.Notifier{hook("a", a.URL, "json"), hook("a", b.URL, "json")}, "declared twice"},
		{"an unknown format is refused", []*config.Notifier{hook("a", a.URL, "xml")}, `format "xml" is not known`},
		{"the log's name is reserved", []*config.Notifier{hook(notify.LogName, a.URL, "json")}, "must not be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := d.Reconfigure(tt.notifiers); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}

	// Add b: it resumes from its stored cursor; a goes on undisturbed.
	if err := d.Reconfigure([]*config.Notifier{hook("a", a.URL, "json"), hook("b", b.URL, "json")}); err != nil {
		t.Fatal(err)
	}
	if r := b.next(t); r.Seq != 1 {
		t.Fatalf("b got seq %d, want 1", r.Seq)
	}
	// Remove a: b alone gets the next notice.
	if err := d.Reconfigure([]*config.Notifier{hook("b", b.URL, "json")}); err != nil {
		t.Fatal(err)
	}
	commit(t, st, switched(2, 1, decide.ReasonFailback))
	d.Wake()
	if r := b.next(t); r.Seq != 2 {
		t.Fatalf("b got seq %d, want 2", r.Seq)
	}
	if n := len(a.got); n != 0 {
		t.Errorf("a removed webhook got %d requests", n)
	}
	if got := cursor(t, st, "a"); got != 1 {
		t.Errorf("a removed webhook's cursor %d, want it kept at 1", got)
	}
}

func TestRunRefusesASecondRun(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	lb, logger := newLog()
	d, err := notify.New(st, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	lb.WaitFor(t, wait, "new notifier", `"notifier":"(log)"`)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Run(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("a second Run: %v", err)
	}
}

// TestTheLogIsBoundedPerPass: a burst of events (a fleet-wide failover) is
// logged one by one up to LogLineLimit, and the rest is counted in one
// line rather than burying the log; each event logged is logged once.
func TestTheLogIsBoundedPerPass(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 1000)
	t.Cleanup(func() { st.Close() })
	startAt(t, st, 0, notify.LogName)
	const burst = notify.LogLineLimit + 30
	evs := make([]store.Event, burst)
	for i := range evs {
		evs[i] = switched(1, 2, decide.ReasonFailover)
	}
	commit(t, st, evs...)
	lb, logger := newLog()
	d, err := notify.New(st, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	lb.WaitFor(t, wait, "more events at once than are logged one by one", fmt.Sprintf(`"logged":%d`, notify.LogLineLimit), `"not_logged":30`)
	out := lb.String()
	if n := strings.Count(out, `"@message":"Origin level switched automatically"`); n != notify.LogLineLimit {
		t.Errorf("%d switch lines logged, want %d", n, notify.LogLineLimit)
	}
	for seq := 1; seq <= notify.LogLineLimit; seq++ {
		if n := strings.Count(out, fmt.Sprintf(`"seq":%d,`, seq)); n != 1 {
			t.Errorf("event %d logged %d times, want once", seq, n)
		}
	}
}
