package history_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/simulate"
)

// A day of 30 s rounds of a site of two origins, written through the
// ring, exports as every round at its time and replays exactly as the
// rounds themselves do (the export built from what was recorded, round
// by round), under the recording's settings and under other ones: the
// runs lose nothing the replay reads (the abstentions wobble, and the
// latencies are kept only for the last rounds).
func TestDayReplaysAsRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, _ := open(t, path, history.Options{Origins: 2})
	names := []simulate.Names{{Site: "www", Origin: "a1"}, {Site: "www", Origin: "b1"}}
	ks := []uint64{history.Key("www", "a1"), history.Key("www", "a1")}
	ks[1] = history.Key("www", "b1")
	slots := sync(t, r, ks)
	truth := &simulate.Export{Header: simulate.ExportHeader{Version: simulate.ExportVersion, Names: "config", RoundInterval: "30s",
		Sources: []string{"direct"}, Votes: true, Rounds: history.DefaultRounds}}
	for _, n := range names {
		truth.Origins = append(truth.Origins, simulate.ExportOrigin{Site: n.Site, Origin: n.Origin})
	}
	n := history.DefaultRounds
	for i := range n {
		at := t0.Add(time.Duration(i)*30*time.Second + time.Duration(i*37%29)*time.Millisecond)
		var obs []history.Obs
		for k := range 2 {
			up, down := uint8(2), uint8(0)
			switch {
			case k == 0 && i >= 1000 && i < 1010:
				up, down = 0, 2 // a1 down: a failover, then back
			case k == 0 && i >= 2000 && i < 2006:
				up, down = 1, 1 // split: settled up with min_votes 1, by no one with 2
			}
			v := history.Up
			if down > up {
				v = history.Down
			}
			o := history.Obs{Slot: slots[k], Verdict: v, By: 0, State: history.Healthy, Latency: time.Duration(i%50) * time.Millisecond, NVotes: 1}
			o.Votes[0] = history.Tally{Source: 0, Up: up, Down: down, Abstain: uint8(i % 3)}
			obs = append(obs, o)
			truth.Origins[k].Points = append(truth.Origins[k].Points, simulate.ExportPoint{T: at.Unix(), TMs: at.Nanosecond() / 1e6,
				V: v.String(), By: "direct", S: "healthy", MS: float64(i % 50),
				Votes: []simulate.ExportTally{{Src: "direct", Up: int(up), Down: int(down), Abstain: i % 3}}})
		}
		if _, err := r.Record(at, obs); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := history.ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	x := simulate.BuildExport(snap, names, simulate.ExportHeader{Names: "config", RoundInterval: "30s", Sources: []string{"direct"}}, nil)
	for k, o := range x.Origins {
		if len(o.Points) != n {
			t.Fatalf("%s: %d points exported, want %d", o.Origin, len(o.Points), n)
		}
		for i, p := range o.Points {
			if want := truth.Origins[k].Points[i]; p.At() != want.At() || p.V != want.V || p.Votes[0].Up != want.Votes[0].Up || p.Votes[0].Down != want.Votes[0].Down {
				t.Fatalf("%s round %d: %+v, recorded %+v", o.Origin, i, p, want)
			}
		}
	}
	for _, minVotes := range []int{1, 2} {
		t.Run(fmt.Sprintf("min_votes=%d", minVotes), func(t *testing.T) {
			cfg, diags := config.Parse("c.hcl", []byte(fmt.Sprintf(`
control { round_interval = "30s" }
source "direct" {
  plugin    = "vigil-source-direct"
  min_votes = %d
}
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`, minVotes)))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			got, err := simulate.Replay(x, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want, err := simulate.Replay(truth, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got.Rounds != n || want.Rounds != n {
				t.Fatalf("replayed %d rounds from the file, %d from the rounds themselves; want %d", got.Rounds, want.Rounds, n)
			}
			if len(want.Sites) != 1 || len(want.Sites[0].Replayed) == 0 {
				t.Fatalf("the recorded rounds replay without a switch: %+v", want.Sites)
			}
			if len(got.Sites) != 1 || !slices.Equal(got.Sites[0].Replayed, want.Sites[0].Replayed) || !slices.Equal(got.Sites[0].ReplayedNotices, want.Sites[0].ReplayedNotices) {
				t.Fatalf("the file replays as\n%+v\nthe rounds as\n%+v", got.Sites, want.Sites)
			}
		})
	}
}
