package simulate_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/simulate"
)

// TestSimulateAutoProbesEverySite: a replay has no real time, so with
// sites_per_round = "auto" every round probes every eligible site, as if
// probes took no time; a number keeps its limit, longest ago first.
func TestSimulateAutoProbesEverySite(t *testing.T) {
	for _, tt := range []struct {
		perRound string
		want     []int // sites probed by rounds 1, 2, 3
	}{
		{`"auto"`, []int{5, 5, 5}},
		{"2", []int{2, 2, 2}},
	} {
		t.Run(tt.perRound, func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, "control {\n  sites_per_round = %s\n}\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n", tt.perRound)
			for i := range 5 {
				fmt.Fprintf(&b, "site \"s%d\" {\n  hostname = \"s%d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" { address = \"http://127.0.0.1:2\" }\n}\n", i, i)
			}
			cfg, diags := config.Parse("test.hcl", []byte(b.String()))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			steps, err := simulate.ParseTimeline(strings.NewReader(strings.Repeat(`{"round": {"s0/a": {"direct": ["down"]}}}`+"\n", 3)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := simulate.Run(cfg, steps, &out); err != nil {
				t.Fatal(err)
			}
			got := make([]int, 3)
			for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
				var l struct {
					Round int    `json:"round"`
					Site  string `json:"site"`
				}
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				if l.Site != "" && l.Round >= 1 && l.Round <= 3 {
					got[l.Round-1]++
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("sites probed by round %v, want %v\n%s", got, tt.want, out.String())
			}
		})
	}
}
