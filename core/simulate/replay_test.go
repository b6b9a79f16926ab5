package simulate_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
)

func replayConfig(t *testing.T, hc string) *config.Config {
	t.Helper()
	cfg, diags := config.Parse("r.hcl", []byte(`
control { round_interval = "10s" }
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
`+hc+`
  }
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

// incident: a1 up 2 rounds, down 4, up 4; b1 up throughout; rounds every
// 10 s from t0, and 70 s between rounds 8 and 9 (the agent was stopped):
// 6 empty rounds fill the gap.
func incident() *simulate.Export {
	const t0 = 1_700_000_000
	a1 := []string{"up", "up", "down", "down", "down", "down", "up", "up", "up", "up"}
	x := &simulate.Export{Header: simulate.ExportHeader{Version: simulate.ExportVersion, RoundInterval: "10s", Journal: "included"}}
	var pa, pb []simulate.ExportPoint
	at := int64(t0)
	for i, v := range a1 {
		if i == 8 {
			at += 60
		}
		pa = append(pa, simulate.ExportPoint{T: at, V: v})
		pb = append(pb, simulate.ExportPoint{T: at, V: "up"})
		at += 10
	}
	x.Origins = []simulate.ExportOrigin{{Site: "www", Origin: "a1", Points: pa}, {Site: "www", Origin: "b1", Points: pb}}
	x.Events = []store.Event{
		{Site: "www", Time: timeAt(pa[4].T + 1), Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover}},
		{Site: "www", Time: timeAt(pa[7].T + 1), Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 2, ToLevel: 1, Reason: decide.ReasonFailback}},
	}
	return x
}

func TestReplay(t *testing.T) {
	x := incident()
	var buf bytes.Buffer
	if err := x.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := simulate.ReadExport(&buf)
	if err != nil || len(back.Origins) != 2 || len(back.Events) != 2 {
		t.Fatalf("round trip: %v, %+v", err, back)
	}
	for _, tc := range []struct {
		name, hc string
		// the replayed switches: round (1-based, rounds 9-14 the empty
		// ones filling the gap) and reason
		want    []string
		verdict string
	}{
		{"the recorded rules", "unhealthy_threshold = 3\nhealthy_threshold = 2", []string{"5 failover", "8 failback"}, "the same number of switches (2), failover at the same time"},
		{"a stricter threshold", "unhealthy_threshold = 4\nhealthy_threshold = 2", []string{"6 failover", "8 failback"}, "the same number of switches (2), failover 10 s later"},
		{"a threshold never reached", "unhealthy_threshold = 5", nil, "2 fewer switches (0 instead of 2)"},
		// quarantine 90 s = 9 rounds from round 5: a1, judged healthy
		// since round 8, is shown healthy at round 14, an empty round of
		// the gap: the quarantine ends on the round clock.
		{"a quarantine across the gap", "quarantine = \"90s\"", []string{"5 failover", "14 failback"}, "the same number of switches (2), failover at the same time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := simulate.Replay(back, replayConfig(t, tc.hc))
			if err != nil {
				t.Fatal(err)
			}
			if res.Rounds != 16 {
				t.Fatalf("%d rounds, want 10 recorded and 6 filled", res.Rounds)
			}
			var got []string
			for _, s := range res.Sites[0].Replayed {
				got = append(got, strings.Join([]string{itoa(s.Round), s.Reason}, " "))
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Fatalf("replayed %v, want %v", got, tc.want)
			}
			if res.Summary() != tc.verdict {
				t.Fatalf("verdict %q, want %q", res.Summary(), tc.verdict)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func timeAt(unix int64) time.Time { return time.Unix(unix, 0).UTC() }
