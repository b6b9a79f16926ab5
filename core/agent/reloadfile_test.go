package agent_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestReloadFileGauge: ReloadFile, which SIGHUP and POST /v1/reload run,
// drops vigil_config_last_reload_successful to 0 when the file is invalid
// (it stayed 1 when the refusal happened before agent.Reload), and a good
// file sets it back to 1. POST /v1/reload needs the operator's token.
func TestReloadFileGauge(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("op-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := testnet.Addr(t)
	path := filepath.Join(dir, "vigil.hcl")
	text := func(failback string) string {
		return fmt.Sprintf(`
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
  failback = %q
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
`, dir, listen, tokenFile, failback)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(text("auto"))
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	logs := &sdktest.LogBuffer{}
	a, err := agent.Start(cfg, agent.Options{
		ConfigPath: path, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
		NewSource: enginetest.Sources{}.Factory(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	gauge := func() string {
		t.Helper()
		resp, err := http.Get("http://" + listen + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^vigil_config_last_reload_successful (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatal("no vigil_config_last_reload_successful in /metrics")
		}
		return string(m[1])
	}
	post := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/reload", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if g := gauge(); g != "1" {
		t.Fatalf("gauge %s after start, want 1", g)
	}

	steps := []struct {
		name      string
		failback  string
		viaAPI    bool
		wantGauge string
		wantCode  int
	}{
		{"invalid file, by signal", "sometimes", false, "0", 0},
		{"good file, by signal", "auto", false, "1", 0},
		{"invalid file, by the API", "sometimes", true, "0", http.StatusUnprocessableEntity},
		{"good file, by the API", "manual", true, "1", http.StatusOK},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			write(text(s.failback))
			if s.viaAPI {
				code, body := post("op-token")
				if code != s.wantCode {
					t.Fatalf("POST /v1/reload = %d, want %d: %s", code, s.wantCode, body)
				}
				if code != http.StatusOK && (!strings.Contains(body, `"reload_refused"`) || !strings.Contains(body, "Invalid failback")) {
					t.Errorf("the refusal does not carry the diagnostics: %s", body)
				}
				if code == http.StatusOK && !strings.Contains(body, `"reloaded": true`) {
					t.Errorf("the answer does not say it reloaded: %s", body)
				}
			} else {
				_, err := a.ReloadFile("test")
				var ice *agent.InvalidConfigError
				if s.wantGauge == "0" && (!errors.As(err, &ice) || !errors.Is(err, agent.ErrReloadRefused) || !strings.Contains(ice.Diagnostics, "Invalid failback")) {
					t.Fatalf("ReloadFile of an invalid file = %v, want an InvalidConfigError with the diagnostics", err)
				}
				if s.wantGauge == "1" && err != nil {
					t.Fatalf("ReloadFile of a good file: %v", err)
				}
			}
			if g := gauge(); g != s.wantGauge {
				t.Errorf("gauge %s, want %s", g, s.wantGauge)
			}
		})
	}
	t.Run("POST /v1/reload without the token", func(t *testing.T) {
		if code, body := post(""); code != http.StatusUnauthorized {
			t.Errorf("POST /v1/reload without a token = %d, want 401: %s", code, body)
		}
		if code, body := post("wrong"); code != http.StatusUnauthorized {
			t.Errorf("POST /v1/reload with a wrong token = %d, want 401: %s", code, body)
		}
	})
}
