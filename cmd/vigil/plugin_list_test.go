package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/sdk"
)

// TestPluginProtocolsEndToEnd runs a real agent with two sources: a frozen
// protocol-1 plugin (core/pluginhost/testdata/v1source, built here) and
// today's vigil-source-direct (protocol 2). The site's origin is behind a
// private CA (ca_file): the protocol-1 plugin cannot carry it, so the agent
// never hands it that origin and abstains for it, with the reason; direct
// checks it with the bundle and settles it up. vigil validate warns at the
// legacy source's line, and vigil plugin list shows both plugins' protocol,
// SDK and capabilities.
func TestPluginProtocolsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	dir := t.TempDir()
	legacy := filepath.Join(dir, "vigil-source-legacy")
	if out, err := exec.Command("go", "build", "-o", legacy, "../../core/pluginhost/testdata/v1source").CombinedOutput(); err != nil {
		t.Fatalf("build the protocol-1 plugin: %v\n%s", err, out)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	origin := httptest.NewTLSServer(ok)
	t.Cleanup(origin.Close)
	backup := httptest.NewTLSServer(ok) // the same certificate (httptest's own)
	t.Cleanup(backup.Close)
	caFile := filepath.Join(dir, "origin-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: origin.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`control {
  round_interval = "30s" # the first round runs at the start; the test asks no other
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "legacy" {
  plugin = %q
}
source "direct" {
  plugin = "vigil-source-direct"
}
site "www" {
  hostname = "example.com"
  health_check {
    path                = "/"
    timeout             = "10s" # generous: a loaded machine is no failure
    ca_file             = %q
    unhealthy_threshold = 1
    healthy_threshold   = 1
  }
  origin "a" { address = %q }
  origin "b" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), binDir, legacy, caFile, origin.URL, backup.URL)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("validate warns at the legacy source", func(t *testing.T) {
		t.Setenv("VIGIL_TOKEN", "e2e-token")
		var out, errb bytes.Buffer
		code := run([]string{"validate", config}, &out, &errb)
		all := out.String() + errb.String()
		if code != 0 {
			t.Fatalf("vigil validate: exit %d (a warning is no error):\n%s", code, all)
		}
		want := []string{"Warning: Vote-source plugin cannot check some sites", `vigil.hcl line 10, in source "legacy"`, `Source "legacy"`,
			"speaks vote-source protocol 1, which cannot carry the health check's ca_file, and site www sets it", sdk.PluginReasonMissingCapability}
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("validate output lacks %q:\n%s", w, all)
			}
		}
		if strings.Contains(all, `Source "direct": plugin`) {
			t.Errorf("validate warns of direct, which declares tls.ca_bundle:\n%s", all)
		}
	})

	p := startAgentProc(t, config)
	c := p.client()
	ctx := context.Background()
	var sources []api.SourceInfo
	waitFor(t, "both plugins running and the legacy source holding back the origin", 30*time.Second, func() bool {
		var err error
		sources, err = c.Sources(ctx)
		return err == nil && len(sources) == 2 && sources[0].PID > 0 && sources[1].PID > 0 && sources[0].Unsupported > 0
	})
	if l, d := sources[0], sources[1]; l.Protocol != 1 || l.SDKVersion != "" || len(l.Capabilities) != 0 ||
		d.Protocol != 2 || d.SDKVersion != sdk.Version || !strings.Contains(strings.Join(d.Capabilities, ","), sdk.CapabilityCABundle) {
		t.Errorf("GET /v1/sources: legacy %+v\ndirect %+v", l, d)
	}

	t.Run("the origin is settled up by direct, the legacy plugin abstained for", func(t *testing.T) {
		res, err := c.Probe(ctx, "www")
		if err != nil {
			t.Fatal(err)
		}
		o := res.Origins[0]
		if o.Verdict != "up" || o.By == nil || *o.By != "direct" {
			t.Errorf("verdict %s by %v, want up by direct: %+v", o.Verdict, o.By, o.Votes)
		}
		found := false
		for _, v := range o.Votes {
			if v.Source == "legacy" {
				found = true
				if v.Voter != "vigil" || v.Value != "abstain" || v.Reason != "unsupported" || !strings.Contains(v.Detail, "protocol 1") {
					t.Errorf("legacy's vote = %+v, want the agent's abstention", v)
				}
			}
		}
		if !found {
			t.Errorf("no vote of legacy: %+v", o.Votes)
		}
	})

	t.Run("plugin list", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"plugin", "list", "-address", p.api, "-token", "e2e-token"}, &out, &errb); code != 0 {
			t.Fatalf("vigil plugin list: exit %d: %s", code, errb.String())
		}
		lines := strings.Split(out.String(), "\n")
		if len(lines) < 4 || !strings.HasPrefix(lines[0], "SOURCE") {
			t.Fatalf("vigil plugin list:\n%s", out.String())
		}
		legacyRow, directRow := strings.Fields(lines[1]), strings.Fields(lines[2])
		if len(legacyRow) < 9 || legacyRow[0] != "legacy" || legacyRow[1] != "v1source" || legacyRow[3] != "1" || legacyRow[4] != "-" || legacyRow[5] != "-" {
			t.Errorf("legacy row %q", lines[1])
		}
		if len(directRow) < 9 || directRow[0] != "direct" || directRow[1] != "vigil-source-direct" || directRow[3] != "2" || directRow[4] != sdk.Version ||
			!strings.Contains(directRow[5], "tls.ca_bundle") || directRow[6] == "-" {
			t.Errorf("direct row %q", lines[2])
		}
		if !strings.Contains(out.String(), "source legacy: its plugin speaks protocol 1") {
			t.Errorf("no note on the protocol-1 plugin:\n%s", out.String())
		}
		out.Reset()
		if code := run([]string{"plugin", "list", "-address", p.api, "-token", "e2e-token", "-json"}, &out, &errb); code != 0 {
			t.Fatalf("vigil plugin list -json: exit %d: %s", code, errb.String())
		}
		var ans api.SourcesAnswer
		if err := json.Unmarshal(out.Bytes(), &ans); err != nil || len(ans.Sources) != 2 || ans.Sources[1].Protocol != 2 {
			t.Errorf("-json: %v %+v", err, ans)
		}
	})
}
