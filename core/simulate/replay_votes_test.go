package simulate_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
)

func chainConfig(t *testing.T, sources string) *config.Config {
	t.Helper()
	cfg, diags := config.Parse("c.hcl", []byte(`
control { round_interval = "10s" }
`+sources+`
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

// votedIncident is recorded with the chain node (min_votes 2, own), then
// direct (min_votes 1, own); rounds every 10 s. a1's node votes:
//
//	rounds 1-2   3 up                     up
//	round 3      2 down, 1 abstain        down (2 votes: min_votes 2 met)
//	round 4      1 up, 2 abstain          unsettled (1 vote); direct: 1 down, down
//	rounds 5-6   3 down                   down
//	rounds 7-10  3 up                     up
//
// b1: 3 up node votes every round. Recorded: failover at round 5 (the 3rd
// down), failback at round 8 (the 2nd up).
func votedIncident() *simulate.Export {
	const t0 = 1_700_000_000
	x := &simulate.Export{Header: simulate.ExportHeader{Version: simulate.ExportVersion, RoundInterval: "10s",
		Sources: []string{"node", "direct"}, Votes: true, Journal: "included"}}
	node := func(up, down, ab int) []simulate.ExportTally {
		return []simulate.ExportTally{{Src: "node", Up: up, Down: down, Abstain: ab}}
	}
	a1 := [][]simulate.ExportTally{node(3, 0, 0), node(3, 0, 0), node(0, 2, 1),
		append(node(1, 0, 2), simulate.ExportTally{Src: "direct", Down: 1}),
		node(0, 3, 0), node(0, 3, 0), node(3, 0, 0), node(3, 0, 0), node(3, 0, 0), node(3, 0, 0)}
	verdicts := []string{"up", "up", "down", "down", "down", "down", "up", "up", "up", "up"}
	var pa, pb []simulate.ExportPoint
	for i := range a1 {
		at := int64(t0 + 10*i)
		pa = append(pa, simulate.ExportPoint{T: at, V: verdicts[i], Votes: a1[i]})
		pb = append(pb, simulate.ExportPoint{T: at, V: "up", Votes: node(3, 0, 0)})
	}
	x.Origins = []simulate.ExportOrigin{{Site: "www", Origin: "a1", Points: pa}, {Site: "www", Origin: "b1", Points: pb}}
	x.Events = []store.Event{
		{Site: "www", Time: timeAt(pa[4].T + 1), Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover}},
		{Site: "www", Time: timeAt(pa[7].T + 1), Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 2, ToLevel: 1, Reason: decide.ReasonFailback}},
	}
	return x
}

func TestReplayVotesThroughTheChain(t *testing.T) {
	var buf bytes.Buffer
	if err := votedIncident().Write(&buf); err != nil {
		t.Fatal(err)
	}
	x, err := simulate.ReadExport(&buf)
	if err != nil || !x.Header.Votes || len(x.Origins[0].Points[3].Votes) != 2 {
		t.Fatalf("round trip: %v, %+v", err, x)
	}
	src := func(name string, minVotes int, tally string) string {
		return `source "` + name + `" {
  plugin    = "vigil-source-` + name + `"
  min_votes = ` + itoa(minVotes) + `
  tally     = "` + tally + `"
}
`
	}
	for _, tc := range []struct {
		name, sources string
		want          []string // replayed switches: round and reason
		verdict, warn string
	}{
		{"the recorded chain", src("node", 2, "own") + src("direct", 1, "own"),
			[]string{"5 failover", "8 failback"}, "the same number of switches (2), failover at the same time", ""},
		// Round 3's two down votes no longer settle, and direct was not
		// asked then: none. Downs at 4, 5, 6.
		{"node min_votes 2 -> 3", src("node", 3, "own") + src("direct", 1, "own"),
			[]string{"6 failover", "8 failback"}, "the same number of switches (2), failover 10 s later", ""},
		// Round 4: direct counts node's up with its own down: a tie.
		{"direct tally own -> carry", src("node", 2, "own") + src("direct", 1, "carry"),
			[]string{"6 failover", "8 failback"}, "the same number of switches (2), failover 10 s later", ""},
		// Round 3: node's two downs are too few for node, but direct,
		// carrying them, settles down; round 4 is the tie.
		{"node min_votes 3, direct carry", src("node", 3, "own") + src("direct", 1, "carry"),
			[]string{"6 failover", "8 failback"}, "the same number of switches (2), failover 10 s later", ""},
		// Rounds 3 and 4 carry 2 votes, fewer than 3: a1 is down twice
		// only.
		{"node min_votes 3, direct carry, min_votes 3", src("node", 3, "own") + src("direct", 3, "carry"),
			nil, "2 fewer switches (0 instead of 2)", ""},
		{"direct first", src("direct", 1, "own") + src("node", 2, "own"),
			[]string{"5 failover", "8 failback"}, "the same number of switches (2), failover at the same time", ""},
		{"direct dropped", src("node", 2, "own"),
			[]string{"6 failover", "8 failback"}, "the same number of switches (2), failover 10 s later", `"direct" is not in this configuration`},
		{"a source added", src("dnspup", 1, "own") + src("node", 2, "own") + src("direct", 1, "own"),
			[]string{"5 failover", "8 failback"}, "the same number of switches (2), failover at the same time", `"dnspup" is not in the recording`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := simulate.Replay(x, chainConfig(t, tc.sources))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Votes || res.Rounds != 10 {
				t.Fatalf("votes %v, %d rounds", res.Votes, res.Rounds)
			}
			var got []string
			for _, s := range res.Sites[0].Replayed {
				got = append(got, itoa(s.Round)+" "+s.Reason)
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Fatalf("replayed %v, want %v", got, tc.want)
			}
			if res.Summary() != tc.verdict {
				t.Fatalf("verdict %q, want %q", res.Summary(), tc.verdict)
			}
			warns := strings.Join(res.Warnings, "\n")
			if (tc.warn == "") != (warns == "") || !strings.Contains(warns, tc.warn) {
				t.Fatalf("warnings %q, want %q", warns, tc.warn)
			}
			var out bytes.Buffer
			res.WriteText(&out)
			if !strings.Contains(out.String(), "(votes: through this configuration's chain") {
				t.Fatalf("the output does not say votes were replayed:\n%s", out.String())
			}
		})
	}
}

// An export of version 1 (verdicts only) is still read and replays its
// verdicts, whatever its header says of votes; the output says so.
func TestReplayVersion1Export(t *testing.T) {
	var buf bytes.Buffer
	x := votedIncident()
	x.Header.Version = 1
	if err := x.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := simulate.ReadExport(&buf)
	if err != nil || back.Header.Votes {
		t.Fatalf("version 1: %v, votes %v", err, back.Header.Votes)
	}
	// node min_votes 3 would change the votes' replay; verdicts ignore it.
	res, err := simulate.Replay(back, chainConfig(t, `source "node" {
  plugin    = "vigil-source-node"
  min_votes = 3
}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Votes || res.Summary() != "the same number of switches (2), failover at the same time" {
		t.Fatalf("votes %v, %q", res.Votes, res.Summary())
	}
	var out bytes.Buffer
	res.WriteText(&out)
	if !strings.Contains(out.String(), "(verdicts only: chain settings are not replayed)") {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, v := range []string{`{"vigil_history_export": 5}`, `{"vigil_history_export": 0}`} {
		if _, err := simulate.ReadExport(strings.NewReader(v + "\n")); err == nil {
			t.Errorf("%s was read", v)
		}
	}
}

// An export that does not name its sources (made with -data-dir) names
// chain positions: its votes go to the sources by position, with a
// warning.
func TestReplayVotesByPosition(t *testing.T) {
	x := votedIncident()
	x.Header.Sources = nil
	pos := map[string]string{"node": "0", "direct": "1"}
	for i := range x.Origins {
		for j := range x.Origins[i].Points {
			for k := range x.Origins[i].Points[j].Votes {
				v := &x.Origins[i].Points[j].Votes[k]
				v.Src = pos[v.Src]
			}
		}
	}
	res, err := simulate.Replay(x, chainConfig(t, `source "node" {
  plugin    = "vigil-source-node"
  min_votes = 3
}
source "direct" { plugin = "vigil-source-direct" }`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.Sites[0].Replayed {
		got = append(got, itoa(s.Round)+" "+s.Reason)
	}
	if strings.Join(got, ", ") != "6 failover, 8 failback" || !strings.Contains(strings.Join(res.Warnings, "\n"), "by chain position") {
		t.Fatalf("replayed %v, warnings %q", got, res.Warnings)
	}
}
