package simulate_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/simulate"
)

// confirmIncident is a recording of an agent with round_interval 30s and
// confirm_interval 3s: rounds every 30 s from t0; a1 down from the round
// of 60 s, confirmed at 63 s and 66 s (where the recording failed over);
// later rounds at 90 s and 120 s.
func confirmIncident(header bool) *simulate.Export {
	const t0 = 1_700_000_000
	x := &simulate.Export{Header: simulate.ExportHeader{Version: simulate.ExportVersion, Journal: "not read"}}
	if header {
		x.Header.RoundInterval, x.Header.ConfirmInterval = "30s", "3s"
	}
	var pa, pb []simulate.ExportPoint
	for _, p := range []struct {
		at int64
		a1 string
	}{{0, "up"}, {30, "up"}, {60, "down"}, {63, "down"}, {66, "down"}, {90, "down"}, {120, "down"}} {
		pa = append(pa, simulate.ExportPoint{T: t0 + p.at, V: p.a1})
		pb = append(pb, simulate.ExportPoint{T: t0 + p.at, V: "up"})
	}
	x.Origins = []simulate.ExportOrigin{{Site: "www", Origin: "a1", Points: pa}, {Site: "www", Origin: "b1", Points: pb}}
	return x
}

// TestReplayConfirmations: the recorded confirmation rounds are replayed
// as confirmations under a configuration with confirm_interval (the
// failover at 66 s, as recorded), and left out, with a warning, under one
// without (the failover at the third round down, 120 s); a recording
// without confirmations replayed with confirm_interval says it cannot
// invent them.
func TestReplayConfirmations(t *testing.T) {
	const t0 = 1_700_000_000
	for _, tt := range []struct {
		name        string
		hc          string
		header      bool
		at          int64 // the replayed failover, seconds after t0
		confirms    int
		skipped     int
		warn, first string
	}{
		{"with confirm_interval", `confirm_interval = "1s"`, true, 66, 2, 0, "", "replayed 5 rounds and 2 confirmation rounds"},
		{"without", "", true, 120, 0, 2, "2 recorded confirmation rounds are not replayed", "replayed 5 rounds,"},
		{"header unknown, with confirm_interval", `confirm_interval = "1s"`, false, 66, 2, 0, "does not say whether it recorded confirmation rounds", "replayed 5 rounds and 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := replayConfig(t, `unhealthy_threshold = 3
    `+tt.hc)
			cfg.Control.RoundInterval = 30e9
			res, err := simulate.Replay(confirmIncident(tt.header), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Confirmations != tt.confirms || res.SkippedConfirmations != tt.skipped {
				t.Fatalf("confirmations %d replayed, %d skipped; want %d, %d", res.Confirmations, res.SkippedConfirmations, tt.confirms, tt.skipped)
			}
			if len(res.Sites) != 1 || len(res.Sites[0].Replayed) != 1 {
				t.Fatalf("replayed switches %+v", res.Sites)
			}
			if sw := res.Sites[0].Replayed[0]; sw.To != 2 || sw.Time.Unix() != t0+tt.at {
				t.Fatalf("failover %+v at %d s, want to level 2 at %d s", sw, sw.Time.Unix()-t0, tt.at)
			}
			var out bytes.Buffer
			res.WriteText(&out)
			if !strings.HasPrefix(out.String(), tt.first) || !strings.Contains(out.String(), tt.warn) {
				t.Fatalf("output %q; want it to start with %q and say %q", out.String(), tt.first, tt.warn)
			}
		})
	}
	// A recording without confirmations, replayed with confirm_interval.
	x := confirmIncident(true)
	x.Header.ConfirmInterval = ""
	cfg := replayConfig(t, `confirm_interval = "1s"`)
	cfg.Control.RoundInterval = 30e9
	res, err := simulate.Replay(x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res.WriteText(&out)
	if res.Confirmations != 0 || res.Rounds != 7 || !strings.Contains(out.String(), "the recording has no confirmation rounds") {
		t.Fatalf("%d rounds, %d confirmations: %s", res.Rounds, res.Confirmations, out.String())
	}
}
