package pluginhost

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk"
)

// hangGuard only catches hangs: nothing here is timed.
const hangGuard = 60 * time.Second

// suspected returns a Spec tweak whose OnSuspect sends to the channel it
// returns (without blocking, as OnSuspect must).
func suspected() (func(*Spec), <-chan string) {
	ch := make(chan string, 1024)
	return func(s *Spec) {
		s.OnSuspect = func(site string) {
			select {
			case ch <- site:
			default:
			}
		}
	}, ch
}

func nextSuspect(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case site := <-ch:
		return site
	case <-time.After(hangGuard):
		t.Fatal("OnSuspect was not called")
	}
	return ""
}

// TestSuspectsReachOnSuspect: a real plugin process reports a suspect
// between rounds and the host calls Spec.OnSuspect with its site; after
// the plugin crashed and was restarted, the new process's suspects arrive
// too.
func TestSuspectsReachOnSuspect(t *testing.T) {
	tweak, got := suspected()
	src, logs := newSource(t, `voter = "v"`, tweak)
	ctx := context.Background()
	if _, err := src.Vote(ctx, ballot("suspect-www", 2)); err != nil {
		t.Fatal(err)
	}
	if site := nextSuspect(t, got); site != "suspect-www" {
		t.Fatalf("OnSuspect(%q), want suspect-www", site)
	}
	pid := src.PID()
	if _, err := src.Vote(ctx, ballot("exit", 1)); err == nil {
		t.Fatal("a plugin that exits mid-call gave no error")
	}
	waitFor(t, "the plugin to exit", hangGuard, func() bool { return processGone(pid) })
	// The next Vote restarts it; the restarted process opens a new stream.
	if _, err := src.Vote(ctx, ballot("suspect-api", 1)); err != nil {
		t.Fatalf("vote after the restart: %v\nlogs:\n%s", err, logs)
	}
	for {
		site := nextSuspect(t, got)
		if site == "suspect-api" {
			break
		}
		if site != "suspect-www" { // the first process may have sent it twice
			t.Fatalf("OnSuspect(%q) after the restart, want suspect-api", site)
		}
	}
	if st := src.Stats(); st.Suspects < 2 || st.Restarts != 1 {
		t.Fatalf("stats %+v: want at least 2 suspects and 1 restart", st)
	}
}

// TestSuspectsBounded: suspects beyond MaxSuspectsPerSecond, of sites no
// ballot named, or with names that are too long are dropped and counted;
// without OnSuspect every suspect is.
func TestSuspectsBounded(t *testing.T) {
	t.Run("a flood", func(t *testing.T) {
		tweak, got := suspected()
		src, _ := newSource(t, `voter = "v"`, tweak)
		frozen := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
		src.sus.mu.Lock()
		src.sus.now = func() time.Time { return frozen } // one second, for the whole flood
		src.sus.mu.Unlock()
		if _, err := src.Vote(context.Background(), ballot("flood", 1)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the flood to be read", hangGuard, func() bool {
			st := src.Stats()
			return st.Suspects+st.DroppedSuspects == 102
		})
		if st := src.Stats(); st.Suspects != MaxSuspectsPerSecond || st.DroppedSuspects != 102-MaxSuspectsPerSecond {
			t.Fatalf("stats %+v: want %d passed on, the rest dropped", st, MaxSuspectsPerSecond)
		}
		for range MaxSuspectsPerSecond {
			if site := nextSuspect(t, got); site != "flood" {
				t.Fatalf("OnSuspect(%q), want only flood", site)
			}
		}
	})
	t.Run("no OnSuspect", func(t *testing.T) {
		src, _ := newSource(t, `voter = "v"`, nil)
		if _, err := src.Vote(context.Background(), ballot("suspect-www", 1)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the suspect to be dropped", hangGuard, func() bool { return src.Stats().DroppedSuspects == 1 })
		if st := src.Stats(); st.Suspects != 0 {
			t.Fatalf("stats %+v: a suspect passed on without OnSuspect", st)
		}
	})
}

// TestAdmit is the host's rule for one suspect, case by case.
func TestAdmit(t *testing.T) {
	long := strings.Repeat("s", sdk.MaxSuspectName+1)
	s := New(Spec{Name: "t", OnSuspect: func(string) {}})
	s.remember(&sdk.Ballot{Targets: []sdk.Target{{Site: "www"}, {Site: "www"}, {Site: "api"}, {Site: long}}})
	for _, tc := range []struct {
		site, why string
	}{
		{"www", ""},
		{"api", ""},
		{"shop", "site_not_in_a_ballot"},
		{"", "invalid_name"},
		{long, "invalid_name"},
	} {
		t.Run(tc.site[:min(len(tc.site), 8)], func(t *testing.T) {
			if why := s.admit(tc.site); why != tc.why {
				t.Fatalf("admit(%q) = %q, want %q", tc.site, why, tc.why)
			}
		})
	}
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	s.sus.now = func() time.Time { return now }
	s.sus.window = time.Time{}
	for i := range MaxSuspectsPerSecond {
		if why := s.admit("www"); why != "" {
			t.Fatalf("suspect %d within the rate dropped: %s", i, why)
		}
	}
	if why := s.admit("www"); why != "over_rate" {
		t.Fatalf("suspect over the rate: %q, want over_rate", why)
	}
	now = now.Add(time.Second)
	if why := s.admit("www"); why != "" {
		t.Fatalf("suspect in the next second dropped: %s", why)
	}
	if why := New(Spec{Name: "t"}).admit("www"); why != "no_receiver" {
		t.Fatalf("without OnSuspect: %q, want no_receiver", why)
	}
}

// BenchmarkRememberBallot: what remembering a ballot's sites (for the
// suspects' bound) adds to a Vote of 200,000 targets over 2,000 sites.
func BenchmarkRememberBallot(b *testing.B) {
	s := New(Spec{Name: "b", OnSuspect: func(string) {}})
	ballot := sdk.Ballot{Targets: make([]sdk.Target, 200000)}
	for i := range ballot.Targets {
		ballot.Targets[i].Site = fmt.Sprintf("site-%04d", i/100)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.remember(&ballot)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ballot.Targets)), "ns/target")
}

// TestPluginWithoutSuspects: a plugin that predates suspects answers the
// stream Unimplemented; the host gives up on it quietly and votes go on.
func TestPluginWithoutSuspects(t *testing.T) {
	t.Setenv("VIGIL_TEST_NO_SUSPECTS", "1")
	tweak, got := suspected()
	src, logs := newSource(t, `voter = "v"`, func(s *Spec) {
		tweak(s)
		s.Env = []string{"VIGIL_TEST_NO_SUSPECTS"}
	})
	logs.WaitFor(t, hangGuard, "the plugin reports no suspects")
	votes, err := src.Vote(context.Background(), ballot("suspect-www", 2))
	if err != nil || len(votes) != 2 {
		t.Fatalf("Vote = %v, %v", votes, err)
	}
	select {
	case site := <-got:
		t.Fatalf("OnSuspect(%q) from a plugin without suspects", site)
	default:
	}
	if st := src.Stats(); st.Suspects != 0 || st.DroppedSuspects != 0 {
		t.Fatalf("stats %+v", st)
	}
	if strings.Contains(logs.String(), "suspect stream broke") {
		t.Fatalf("the host warned about a plugin that has no suspects:\n%s", logs)
	}
}
