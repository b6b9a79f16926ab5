package simulate_test

import (
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/simulate"
)

// drilledRecording: a drill of level 1 in rounds 3-6 (a1 settled down
// "by": "drill") while the real source, asked as in any round, voted it
// up; rounds 7-10 are real again. Recorded: failover at round 5 (the third
// drill verdict), failback at round 8 (the second real up).
func drilledRecording() *simulate.Export {
	const t0 = 1_700_000_000
	x := &simulate.Export{Header: simulate.ExportHeader{Version: simulate.ExportVersion, RoundInterval: "10s",
		Sources: []string{"node"}, Votes: true, Journal: "included"}}
	up := []simulate.ExportTally{{Src: "node", Up: 3}}
	var pa, pb []simulate.ExportPoint
	for i := range 10 {
		at := int64(t0 + 10*i)
		p := simulate.ExportPoint{T: at, V: "up", By: "node", Votes: up}
		if i >= 2 && i <= 5 {
			p.V, p.By = "down", "drill"
		}
		pa = append(pa, p)
		pb = append(pb, simulate.ExportPoint{T: at, V: "up", By: "node", Votes: up})
	}
	x.Origins = []simulate.ExportOrigin{{Site: "www", Origin: "a1", Points: pa}, {Site: "www", Origin: "b1", Points: pb}}
	return x
}

// TestReplayDrill: a replay treats the drill's verdicts as the drill's:
// under the recorded chain and under another one (min_votes no recorded
// round could meet), the drill still fails the site over when it did,
// and the real up votes recorded beside it are not counted; a warning
// says so. Without the drill's "by", the same tallies are up: no switch.
func TestReplayDrill(t *testing.T) {
	src := func(minVotes string) string {
		return `source "node" {
  plugin    = "vigil-source-node"
  min_votes = ` + minVotes + `
}
`
	}
	for _, tc := range []struct {
		name, sources string
		drill         bool
		want          string
	}{
		{"the recorded chain", src("2"), true, "5 failover, 8 failback"},
		{"a stricter chain", src("5"), true, "5 failover"},
		{"no drill recorded", src("2"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := drilledRecording()
			if !tc.drill {
				for i := range x.Origins[0].Points {
					p := &x.Origins[0].Points[i]
					p.V, p.By = "up", "node"
				}
			}
			res, err := simulate.Replay(x, chainConfig(t, tc.sources))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range res.Sites[0].Replayed {
				got = append(got, itoa(s.Round)+" "+s.Reason)
			}
			if strings.Join(got, ", ") != tc.want {
				t.Fatalf("replayed %q, want %q", strings.Join(got, ", "), tc.want)
			}
			warns := strings.Join(res.Warnings, "\n")
			if want := `4 recorded verdicts were a failover drill's (by "drill")`; tc.drill != strings.Contains(warns, want) {
				t.Errorf("warnings %q: want %q: %v", warns, want, tc.drill)
			}
		})
	}
}
