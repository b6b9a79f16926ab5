package agent_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestReloadOfAnUnchangedFile: a reload of the unchanged file keeps the
// engine's sites and sources (config.Unchanged) and still reads the token
// again; a changed file is applied in full.
func TestReloadOfAnUnchangedFile(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := testnet.Addr(t)
	path := filepath.Join(dir, "vigil.hcl")
	write := func(extra string) {
		t.Helper()
		src := fmt.Sprintf(`
control {
  round_interval = "1h"
  data_dir       = %q
  api {
    listen     = %q
    token_file = %q
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
%s`, dir, listen, tokenFile, extra)
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	cfg, diags := config.LoadCached(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	a, err := agent.Start(cfg, agent.Options{
		ConfigPath: path, Logger: hclog.New(&hclog.LoggerOptions{Output: &sdktest.LogBuffer{}, Level: hclog.Debug}),
		NewSource: enginetest.Sources{}.Factory(), ListenFile: filepath.Join(dir, "listen"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })

	if err := os.WriteFile(tokenFile, []byte("second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := a.ReloadFile("test")
	if err != nil {
		t.Fatal(err)
	}
	applied := strings.Join(res.Applied, "; ")
	if !strings.Contains(applied, "the configuration is unchanged") {
		t.Errorf("reload of the unchanged file: applied %q, want the sites and sources kept", applied)
	}
	if !strings.Contains(applied, "token") {
		t.Errorf("reload of the unchanged file: applied %q, want the token read again", applied)
	}
	if code := switchWith(t, listen, "second-token"); code != 200 {
		t.Errorf("the new token is refused after the reload: %d", code)
	}

	write(`site "shop" {
  hostname = "shop.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" { address = "http://127.0.0.1:18003" }
}`)
	res, err = a.ReloadFile("test")
	if err != nil {
		t.Fatal(err)
	}
	if applied := strings.Join(res.Applied, "; "); strings.Contains(applied, "unchanged") {
		t.Fatalf("reload of a changed file: applied %q", applied)
	}
	resp, err := http.Get("http://" + listen + "/v1/sites/shop")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/sites/shop after the reload: %d, want 200", resp.StatusCode)
	}
}
