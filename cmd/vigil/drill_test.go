package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
)

// TestDrillReportWithoutEndpoint: an agent that answers 404 to GET
// /v1/sites/{site}/failovers (one from before the report) gets the drill's
// journal times and a clear word that the report is not available there.
func TestDrillReportWithoutEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, &api.Error{Status: http.StatusNotFound, Code: "not_found", Message: "no endpoint " + r.Method + " " + r.URL.Path})
	}))
	t.Cleanup(srv.Close)
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	f := &drillFollower{c: api.NewClient(srv.URL, ""), site: "www", events: []api.EventLine{
		{Seq: 4, Time: at, Site: "www", Actor: "alice", Event: api.Event{Kind: api.KindDrillStarted, Level: 1, Seconds: 120}},
		{Seq: 7, Time: at.Add(1500 * time.Millisecond), Site: "www", Event: api.Event{Kind: api.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: api.ReasonFailover, Drill: true}},
		{Seq: 9, Time: at.Add(2 * time.Minute), Site: "www", Event: api.Event{Kind: api.KindDrillEnded, Level: 1, End: api.DrillEndTime}},
	}}
	var out, errb bytes.Buffer
	if code := f.report(context.Background(), &out, &errb, false); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errb.String(), "the time-to-failover report is not available from this agent") {
		t.Errorf("stderr %q: want the report's absence said", errb.String())
	}
	for _, want := range []string{
		"09:00:00.000 +0s        drill of level 1 started for 120s by alice",
		"09:00:01.500 +1.5s      level 1 -> 2 (failover) [drill]",
		"09:02:00.000 +2m0s      drill of level 1 ended (time_up)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
