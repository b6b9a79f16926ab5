package simulate_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
)

// halfSecond is a recording at 500 ms rounds from t0: a1 up 2 rounds then
// down 6, b1 up throughout; the agent failed over in the fifth round
// (2.0 s after t0), its journal event 120 ms into that round.
func halfSecond() *simulate.Export {
	t0 := time.Unix(1_700_000_000, 0).UTC()
	x := &simulate.Export{Header: simulate.ExportHeader{Version: simulate.ExportVersion, RoundInterval: "500ms", Journal: "included", Votes: false}}
	var pa, pb []simulate.ExportPoint
	for i := range 8 {
		at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
		v := "up"
		if i >= 2 {
			v = "down"
		}
		p := simulate.ExportPoint{T: at.Unix(), TMs: at.Nanosecond() / int(time.Millisecond), V: v}
		pa = append(pa, p)
		p.V = "up"
		pb = append(pb, p)
	}
	x.Origins = []simulate.ExportOrigin{{Site: "www", Origin: "a1", Points: pa}, {Site: "www", Origin: "b1", Points: pb}}
	x.Events = []store.Event{
		{Site: "www", Time: t0.Add(2120 * time.Millisecond), Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover}},
	}
	return x
}

func halfSecondConfig(t *testing.T, unhealthy int) *config.Config {
	t.Helper()
	cfg, diags := config.Parse("r.hcl", []byte(`
control { round_interval = "500ms" }
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check { unhealthy_threshold = `+itoa(unhealthy)+` }
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

// Rounds 500 ms apart replay as as many rounds, each at its own time
// (export version 4 keeps milliseconds): the replayed failover comes at
// the recorded round's sub-second time, and a threshold one round
// stricter moves it 500 ms, not a whole second or none.
func TestReplaySubSecondRounds(t *testing.T) {
	var buf bytes.Buffer
	if err := halfSecond().Write(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"t_ms":500`) {
		t.Fatalf("the export keeps no milliseconds:\n%s", buf.String())
	}
	x, err := simulate.ReadExport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for _, tc := range []struct {
		name      string
		unhealthy int
		at        time.Duration // the replayed failover, after t0
		verdict   string
	}{
		{"the recorded rules", 3, 2000 * time.Millisecond, "the same number of switches (1), failover at the same time"},
		{"one round stricter", 4, 2500 * time.Millisecond, "the same number of switches (1), failover 500ms later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := simulate.Replay(x, halfSecondConfig(t, tc.unhealthy))
			if err != nil {
				t.Fatal(err)
			}
			if res.Rounds != 8 {
				t.Fatalf("%d rounds, want the 8 recorded", res.Rounds)
			}
			if want := t0.Add(3500 * time.Millisecond); !res.To.Equal(want) {
				t.Fatalf("the replay ends at %s, want %s", res.To.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
			}
			sw := res.Sites[0].Replayed
			if len(sw) != 1 || !sw[0].Time.Equal(t0.Add(tc.at)) {
				t.Fatalf("replayed %+v, want one failover at t0+%s", sw, tc.at)
			}
			if rec := res.Sites[0].Recorded; len(rec) != 1 || !rec[0].Time.Equal(t0.Add(2000*time.Millisecond)) {
				t.Fatalf("recorded %+v, want the failover in the round at t0+2s", rec)
			}
			if res.Summary() != tc.verdict {
				t.Fatalf("verdict %q, want %q", res.Summary(), tc.verdict)
			}
		})
	}
}

// An export of version 3 (testdata/replay/version3.jsonl: the same
// recording as kept before milliseconds, whole seconds) still reads and
// replays as it did: rounds within one second are one, 4 rounds for 8,
// and the whole second between them is filled with an empty round each
// (7 in all).
func TestReplayVersion3Export(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "replay", "version3.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := simulate.ReadExport(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if x.Header.Version != 3 {
		t.Fatalf("version %d, want 3", x.Header.Version)
	}
	res, err := simulate.Replay(x, halfSecondConfig(t, 3))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0).UTC()
	if res.Rounds != 7 || !res.To.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("%d rounds to %s, want 7 (4 of whole seconds, 3 filled) to t0+3s", res.Rounds, res.To)
	}
	sw := res.Sites[0].Replayed
	if len(sw) != 1 || !sw[0].Time.Equal(t0.Add(3*time.Second)) || sw[0].Round != 7 {
		t.Fatalf("replayed %+v, want the failover in round 7 at t0+3s", sw)
	}
	if got, want := res.Summary(), "the same number of switches (1), failover 1 s later"; got != want {
		t.Fatalf("verdict %q, want %q", got, want)
	}
}
