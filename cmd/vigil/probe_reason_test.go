package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// TestPluginReasonShown: a real plugin process (core/pluginhost's
// testsource, for its site "pluginreason") votes down with reason
// tls_failed and plugin reason testsource/cert_expiring. The plugin
// reason is a field of the vote, apart from its detail, in vigil probe
// -json and its text, in the agent's site view, and a reason label of
// vigil_vote_plugin_reasons_total.
func TestPluginReasonShown(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "vigil-source-tlscheck")
	build := exec.Command("go", "build", "-o", plugin, "github.com/vigilcdn/vigil/core/pluginhost/testdata/testsource")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test plugin: %v\n%s", err, out)
	}
	var addrs []string
	for _, n := range []string{"a1", "a2"} {
		srv := httptest.NewServer(demoorigin.New(n))
		t.Cleanup(srv.Close)
		addrs = append(addrs, srv.URL)
	}
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "2s"
  data_dir       = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "tlscheck" {
  plugin = %q
  config { voter = "tls-1" }
}
source "direct" { plugin = %q }
site "pluginreason" {
  hostname = "www.example.com"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
}
`, filepath.Join(dir, "data"), plugin, filepath.Join(binDir, "vigil-source-direct"), addrs[0], addrs[1])
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const pluginReason = "testsource/cert_expiring"
	// wantVote checks the plugin's vote on a1 among votes.
	wantVote := func(t *testing.T, votes []api.VoteView) {
		t.Helper()
		for _, v := range votes {
			if v.Source != "tlscheck" {
				continue
			}
			if v.Voter != "tls-1" || v.Value != "down" || v.Reason != "tls_failed" || v.PluginReason != pluginReason || v.Detail != "expires in 3 days" {
				t.Errorf("vote %+v, want tls-1 down tls_failed, plugin reason %s, detail %q", v, pluginReason, "expires in 3 days")
			}
			return
		}
		t.Errorf("no vote of source tlscheck in %+v", votes)
	}

	t.Run("probe -json", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"probe", "-config", config, "-json", "pluginreason"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d:\n%s%s", code, out.String(), errb.String())
		}
		var res api.ProbeResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("not the JSON of a probe: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), `"plugin_reason": "`+pluginReason+`"`) {
			t.Errorf("no plugin_reason field in:\n%s", out.String())
		}
		if len(res.Origins) == 0 || res.Origins[0].Origin != "a1" {
			t.Fatalf("origins %+v, want a1 first", res.Origins)
		}
		wantVote(t, res.Origins[0].Votes)
	})
	t.Run("probe text", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"probe", "-config", config, "pluginreason"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d:\n%s%s", code, out.String(), errb.String())
		}
		if want := "tls_failed " + pluginReason + ": expires in 3 days"; !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	})

	p := startAgentProc(t, config)
	var view api.SiteView
	waitFor(t, "a round with the plugin's vote", time.Minute, func() bool {
		v, err := p.client().Site(context.Background(), "pluginreason")
		if err != nil {
			return false
		}
		for _, vt := range v.Origins["a1"].Votes {
			if vt.Source == "tlscheck" {
				view = *v
				return true
			}
		}
		return false
	})
	t.Run("site view", func(t *testing.T) {
		wantVote(t, view.Origins["a1"].Votes)
		if r := view.Origins["a1"].Reason; !strings.Contains(r, pluginReason+": expires in 3 days") {
			t.Errorf("a1's reason %q lacks the plugin reason before its detail", r)
		}
	})
	t.Run("status card", func(t *testing.T) {
		t.Setenv("VIGIL_ADDR", p.api)
		t.Setenv("VIGIL_TOKEN", "e2e-token")
		var out, errb bytes.Buffer
		if code := run([]string{"status", "pluginreason"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d:\n%s%s", code, out.String(), errb.String())
		}
		if want := "tlscheck/tls-1 down (tls_failed " + pluginReason + ")"; !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	})
	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(p.api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := `vigil_vote_plugin_reasons_total{outcome="down",reason="` + pluginReason + `",source="tlscheck"} `
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
		// The malformed "Not Namespaced" was dropped, never a label.
		if strings.Contains(string(body), "Not Namespaced") {
			t.Error("/metrics has the malformed plugin reason as a label")
		}
	})
}
