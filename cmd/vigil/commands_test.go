package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

const cliConfig = `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`

// TestClientCommands runs the CLI's commands against a real API served by an
// engine with an in-process source, in order (later steps see earlier ones).
func TestClientCommands(t *testing.T) {
	e, _ := enginetest.Start(t, enginetest.Config(t, cliConfig), enginetest.Sources{}, "")
	e.RunRound(context.Background())
	e.RunRound(context.Background())
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: "cli-token"}))
	t.Cleanup(srv.Close)
	t.Setenv("VIGIL_TOKEN", "")
	t.Setenv("VIGIL_ADDR", "")
	addr := []string{"-address", srv.URL}
	auth := append([]string{"-token", "cli-token"}, addr...)
	steps := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		wantJSON bool
	}{
		{"status", append([]string{"status"}, addr...), 0, "www (www.example.com)  level 1  failback auto", "", false},
		{"status shows votes", append([]string{"status", "www"}, addr...), 0, "votes: direct/direct up", "", false},
		{"status json", append([]string{"status", "www", "-json"}, addr...), 0, `"level": 1`, "", true},
		{"status unknown site", append([]string{"status", "nope"}, addr...), 1, "", "no site nope", false},
		{"status too many args", append([]string{"status", "a", "b"}, addr...), 2, "", "usage: vigil status", false},
		{"switch without token", append([]string{"switch", "www", "2"}, addr...), 1, "", "changes need the operator's API token, and the request carried none", false},
		{"switch with a wrong token", append([]string{"switch", "www", "2", "-token", "not-it"}, addr...), 1, "", "the API token sent is not this agent's", false},
		{"probe without token", append([]string{"probe", "www"}, addr...), 1, "", "a probe changes nothing but needs the API token", false},
		{"switch to the top level it is on", append([]string{"switch", "www", "1"}, auth...), 0, "already on level 1, the top level; no manual hold: failback is auto", "", false},
		{"last enabled origin refused", append([]string{"origin", "disable", "www", "b1"}, auth...), 0, "origin b1: healthy -> disabled", "", false},
		{"re-enable b1", append([]string{"origin", "enable", "www", "b1"}, auth...), 0, "origin b1: disabled -> unknown", "", false},
		{"switch not a number", append([]string{"switch", "www", "two"}, auth...), 2, "", "LEVEL must be a number", false},
		{"switch unknown level", append([]string{"switch", "www", "9"}, auth...), 1, "", "site www has no level 9 (its levels are 1, 2)", false},
		{"switch", append([]string{"switch", "www", "2"}, auth...), 0, "www: level 1 -> 2 (manual)", "", false},
		{"switch to current pins", append([]string{"switch", "www", "2"}, auth...), 0, "already on level 2; it is now held there: failback is manual until vigil switch www 1", "", false},
		{"held", append([]string{"status", "www"}, addr...), 0, "level 2  failback auto, held on level 2 by a manual switch (vigil switch www 1 releases it)", "", false},
		{"held in JSON", append([]string{"status", "www", "-json"}, addr...), 0, `"manual_hold": true`, "", true},
		{"counters against thresholds", append([]string{"status", "www"}, addr...), 0, "2/2 good", "", false},
		{"last enabled origin of the current level refused", append([]string{"origin", "disable", "www", "b1"}, auth...), 1, "", "b1 is the last enabled origin of level 2, the current level", false},
		{"the refusal names the way out", append([]string{"origin", "disable", "www", "b1"}, auth...), 1, "", "move the site first with vigil switch www 1", false},
		{"forced", append([]string{"origin", "disable", "-force", "www", "b1"}, auth...), 0, "origin b1: unknown -> disabled", "", false},
		{"enable b1 again", append([]string{"origin", "enable", "www", "b1"}, auth...), 0, "origin b1: disabled -> unknown", "", false},
		{"origin bad verb", append([]string{"origin", "reboot", "www", "a1"}, auth...), 2, "", `vigil origin: unknown subcommand "reboot"`, false},
		{"origin typo", append([]string{"origin", "disabel", "www", "a1"}, auth...), 2, "", `did you mean "disable"?`, false},
		{"unknown flag", append([]string{"status", "-jsn"}, addr...), 2, "", `unknown flag -jsn; did you mean "json"?`, false},
		{"origin unknown", append([]string{"origin", "disable", "www", "zz"}, auth...), 1, "", "site www has no origin zz", false},
		{"origin disable", append([]string{"origin", "disable", "www", "a1"}, auth...), 0, "origin a1: healthy -> disabled", "", false},
		{"events", append([]string{"events", "-site", "www"}, addr...), 0, "level 1 -> 2 (manual) by ", "", false},
		{"events json", append([]string{"events", "-json", "-after", "3"}, addr...), 0, `"kind":"level_switched"`, "", false},
		{"probe through the agent", append([]string{"probe", "www"}, auth...), 0, "one dry-run round through the agent's chain", "", false},
		{"probe shows disabled", append([]string{"probe", "www"}, auth...), 0, "disabled: not probed", "", false},
		{"unreachable agent", []string{"status", "-address", "http://127.0.0.1:1"}, 1, "", "cannot reach the agent", false},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`, false},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(s.args, &out, &errb)
			if code != s.code || !strings.Contains(out.String(), s.stdout) || !strings.Contains(errb.String(), s.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant stdout to contain %q and stderr %q", code, s.code, out.String(), errb.String(), s.stdout, s.stderr)
			}
			if s.wantJSON && !json.Valid(out.Bytes()) {
				t.Fatalf("-json printed invalid JSON:\n%s", out.String())
			}
			if strings.Contains(out.String()+errb.String(), "cli-token") {
				t.Fatal("the token was printed")
			}
		})
	}
}

func TestValidateAndSimulateExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	bad := filepath.Join(dir, "bad.hcl")
	timeline := filepath.Join(dir, "timeline.jsonl")
	badTimeline := filepath.Join(dir, "bad.jsonl")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if binDir == "" {
		t.Skip("vigil validate checks the plugin binaries, which TestMain builds unless -short")
	}
	// plugin_dir: validate checks that the plugin binary is there, even
	// offline.
	write(good, fmt.Sprintf("control { plugin_dir = %q }\n", binDir)+cliConfig)
	write(bad, strings.Replace(cliConfig, `level   = 2`, `level   = 0`, 1))
	write(timeline, `{"round": {"www/a1": {"direct": ["up"]}, "www/a2": {"direct": ["up"]}}}`+"\n"+`{"switch": {"site": "www", "level": 2}}`+"\n")
	write(badTimeline, `{"round": {}}`+"\n"+`{"round": {"www/a1": {"nodes": ["up"]}}}`+"\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"valid", []string{"validate", "-offline", "-config", good}, 0, "configuration is valid: 1 source(s), 1 site(s)", ""},
		{"invalid", []string{"validate", "-offline", "-config", bad}, 1, "", "bad.hcl line 9"},
		{"no path", []string{"validate"}, 2, "", "give a configuration file or folder"},
		{"paths as arguments", []string{"validate", "-offline", good, good}, 0, good + ": configuration is valid", ""},
		{"-config and an argument are both checked", []string{"validate", "-offline", "-config=" + good, bad}, 1, good + ": configuration is valid", bad + ": configuration is not valid"},
		{"a bad one among several fails the whole", []string{"validate", "-offline", bad, good}, 1, good + ": configuration is valid", bad + ": configuration is not valid"},
		{"simulate", []string{"simulate", "-config", good, "-timeline", timeline}, 0, `"reason":"manual"`, ""},
		{"simulate bad timeline names the line", []string{"simulate", "-config", good, "-timeline", badTimeline}, 2, "", "timeline line 2"},
		{"simulate bad config", []string{"simulate", "-config", bad, "-timeline", timeline}, 2, "", "Invalid level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errb.String(), tt.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tt.code, out.String(), errb.String())
			}
		})
	}
}

func TestFmt(t *testing.T) {
	dir := t.TempDir()
	messy := filepath.Join(dir, "messy.hcl")
	tidy := filepath.Join(dir, "tidy.hcl")
	broken := filepath.Join(dir, "broken.hcl")
	os.WriteFile(messy, []byte("site \"www\" {\nhostname=\"www.example.com\"\n  origin \"a1\" {   address = \"http://127.0.0.1:1\" }\n}\n"), 0o600)
	os.WriteFile(tidy, []byte("control {\n  round_interval = \"30s\"\n}\n"), 0o600)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
	}{
		{"check reports", []string{"fmt", "-check", dir}, 3, "messy.hcl"},
		{"formats", []string{"fmt", dir}, 0, "messy.hcl"},
		{"then clean", []string{"fmt", "-check", dir}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code || !strings.Contains(out.String(), tt.stdout) || strings.Contains(out.String(), "tidy.hcl") {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q", code, tt.code, out.String(), errb.String())
			}
		})
	}
	b, _ := os.ReadFile(messy)
	if !strings.Contains(string(b), "  hostname = \"www.example.com\"") {
		t.Fatalf("not formatted:\n%s", b)
	}
	os.WriteFile(broken, []byte("site \"www\" {\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"fmt", broken}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "broken.hcl line 1") {
		t.Fatalf("a syntax error: exit %d, stderr %q", code, errb.String())
	}
}
