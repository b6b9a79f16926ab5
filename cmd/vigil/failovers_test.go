package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
)

func sampleReport() api.FailoverReport {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	at := func(ms int) *api.ReportTime { return api.NewReportTime(t0.Add(time.Duration(ms) * time.Millisecond)) }
	f := func(v float64) *float64 { return &v }
	return api.FailoverReport{Site: "www", FromLevel: 1, ToLevel: 2, Seq: 9, Round: 4, Complete: true, Origin: "a1",
		FirstFailure: at(0), RoundStarted: *at(2000), Decided: *at(2012), Committed: at(2015), Published: at(2016), Publication: 5,
		DetectSeconds: f(2.012), CommitSeconds: f(0.003), PublishSeconds: f(0.004), EdgeSeconds: f(0.02), TotalSeconds: f(2.036),
		Nodes: []api.FailoverNode{
			{Node: "edge-1", Reported: true, Version: 5, Applied: at(2036), EdgeSeconds: f(0.02), Result: "ok", Proxying: true,
				LastRequest: at(2030), LastRequestSeconds: f(2.03), VisitorRequests: 12, VisitorErrors: 1},
			{Node: "edge-old"},
		}}
}

// TestFailoversCommand: vigil failovers reads GET
// /v1/sites/{site}/failovers and prints each step, each node's row and
// "not reported" for a node that said nothing; -json prints the list.
func TestFailoversCommand(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RequestURI())
		if r.URL.Path != "/v1/sites/www/failovers" {
			http.NotFound(w, r)
			return
		}
		api.WriteJSON(w, http.StatusOK, api.FailoverReportList{Site: "www", Failovers: []api.FailoverReport{sampleReport()}})
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"text", []string{"-address", srv.URL, "-n", "3", "www"}, 0, []string{
			"Failover of www, level 1 -> 2 (journal seq 9, round 4)",
			"first failed verdict  2026-12-02T07:00:00.000Z (origin a1)",
			"decided               2026-12-02T07:00:02.012Z  detect   2.012s",
			"publish  0.004s  (version 5)",
			"edge-1    2026-12-02T07:00:02.036Z  0.020s    2026-12-02T07:00:02.030Z  1 of 12     ok",
			"edge-old  not reported",
		}},
		{"json", []string{"-address", srv.URL, "-json", "www"}, 0, []string{`"last_request_seconds": 2.03`, `"reported": false`}},
		{"no site", []string{"-address", srv.URL}, 2, nil},
		{"bad count", []string{"-address", srv.URL, "-n", "0", "www"}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := runFailovers(tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tc.name == "json" {
				var l api.FailoverReportList
				if err := json.Unmarshal(out.Bytes(), &l); err != nil || len(l.Failovers) != 1 || len(l.Failovers[0].Nodes) != 2 {
					t.Fatalf("-json output does not read back: %v", err)
				}
			}
		})
	}
	if len(asked) == 0 || asked[0] != "/v1/sites/www/failovers?limit=3" {
		t.Fatalf("asked %v", asked)
	}
}
