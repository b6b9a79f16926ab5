package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/vigilcdn/vigil/core/config"
)

// historyConfig is a configuration whose control block sets round_interval
// and a history block of body (line 5 holds body's first line).
func historyConfig(interval, body string) string {
	return fmt.Sprintf(`control {
  round_interval = %q
  data_dir       = "/tmp/x"
  history {
    %s
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`, interval, body)
}

// control { history { keep } } sizes the history by time: keep /
// round_interval rounds, rounded up, capped at 1048576 with a warning; 24
// hours without a block.
func TestHistoryKeep(t *testing.T) {
	for _, tc := range []struct {
		name, interval, body string
		rounds               int
		warn                 string
	}{
		{"no block: the default, 24h", "30s", "", 2880, ""},
		{"the default at 500ms", "500ms", "", 172800, ""},
		{"rounds", "30s", "rounds = 100", 100, ""},
		{"8h at 30s", "30s", `keep = "8h"`, 960, ""},
		{"rounded up", "7s", `keep = "1m"`, 9, ""},
		{"one round", "30s", `keep = "30s"`, 1, ""},
		{"24h at 500ms", "500ms", `keep = "24h"`, 172800, ""},
		{"a year at 30s: capped", "30s", `keep = "8760h"`, config.MaxHistoryRounds,
			`keep = 8760h0m0s needs 1051200 rounds at round_interval 30s, and the history keeps at most 1048576 rounds: it keeps 8738h8m0s.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := config.Parse("h.hcl", []byte(historyConfig(tc.interval, tc.body)))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if cfg.Control.HistoryRounds != tc.rounds {
				t.Errorf("HistoryRounds = %d, want %d", cfg.Control.HistoryRounds, tc.rounds)
			}
			if tc.body == "" && cfg.Control.HistoryKeep != config.DefaultHistoryKeep {
				t.Errorf("HistoryKeep = %v without a block, want %v", cfg.Control.HistoryKeep, config.DefaultHistoryKeep)
			}
			var warns []string
			for _, d := range diags {
				if d.Severity == hcl.DiagWarning {
					warns = append(warns, d.Detail)
					if d.Subject == nil || d.Subject.Start.Line != 5 {
						t.Errorf("warning %q not at line 5: %v", d.Detail, d.Subject)
					}
				}
			}
			switch {
			case tc.warn == "" && len(warns) > 0:
				t.Errorf("unexpected warnings %q", warns)
			case tc.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0], tc.warn)):
				t.Errorf("warnings %q, want one with %q", warns, tc.warn)
			}
		})
	}
}

// Bad keep values are errors at the value (h.hcl:5:12), naming the problem
// and the fix.
func TestHistoryKeepInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, interval, body, want string
	}{
		{"not a duration", "30s", `keep = "a day"`, `5:12: Invalid duration for keep; "a day" is not a duration. Write a number with a unit`},
		{"zero", "30s", `keep = "0s"`, `5:12: Invalid duration for keep; keep must be greater than zero; got "0s".`},
		{"negative", "30s", `keep = "-1h"`, `5:12: Invalid duration for keep; keep must be greater than zero`},
		{"a number", "30s", `keep = 3600`, `5:12: `},
		{"shorter than a round", "30s", `keep = "10s"`, `5:12: Invalid history keep; keep must be at least one round_interval (30s); got 10s. Write a longer time, such as "24h".`},
		{"with rounds", "30s", "rounds = 10\n    keep = \"1h\"", `6:12: Both history keep and rounds; Set keep (a time) or rounds (a count), not both; rounds is set at h.hcl:5:14`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := config.Parse("h.hcl", []byte(historyConfig(tc.interval, tc.body)))
			if !diags.HasErrors() {
				t.Fatal("loaded without error")
			}
			var got []string
			for _, d := range diags {
				if d.Severity != hcl.DiagError || d.Subject == nil || d.Subject.Filename != "h.hcl" {
					t.Fatalf("diagnostic %+v: want an error naming h.hcl", d)
				}
				got = append(got, fmt.Sprintf("%d:%d: %s; %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Fatalf("diagnostics %q, want one starting %q", got, tc.want)
			}
		})
	}
}
