package agent_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

type fixture struct {
	dir, tokenFile string
	logs           *sdktest.LogBuffer
	a              *agent.Agent
}

func (f *fixture) config(t *testing.T, listen, extra string) *config.Config {
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
%s`, f.dir, listen, f.tokenFile, extra)
	cfg, diags := config.Parse(filepath.Join(f.dir, "vigil.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

func start(t *testing.T) (*fixture, string) {
	t.Helper()
	return startWith(t, &fixture{dir: t.TempDir()}, "")
}

// startWith starts an agent in f.dir with extra configuration blocks.
func startWith(t *testing.T, f *fixture, extra string) (*fixture, string) {
	t.Helper()
	f.tokenFile, f.logs = filepath.Join(f.dir, "token"), &sdktest.LogBuffer{}
	dir := f.dir
	if err := os.WriteFile(f.tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := testnet.Addr(t)
	a, err := agent.Start(f.config(t, listen, extra), agent.Options{
		Logger:    hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Debug}),
		NewSource: enginetest.Sources{}.Factory(), ListenFile: filepath.Join(dir, "listen"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	f.a = a
	return f, listen
}

func switchWith(t *testing.T, addr, token string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+addr+"/v1/sites/www/switch", strings.NewReader(`{"level": 1}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func metric(t *testing.T, addr, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return ""
}

func TestReloadRotatesTheToken(t *testing.T) {
	f, addr := start(t)
	if code := switchWith(t, addr, "first-token"); code != 200 {
		t.Fatalf("switch with the first token: %d", code)
	}
	if err := os.WriteFile(f.tokenFile, []byte("second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := f.a.Reload(f.config(t, addr, ""))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res.Applied, ";"), "token") {
		t.Errorf("applied %v: the token change is not named", res.Applied)
	}
	if code := switchWith(t, addr, "first-token"); code != 401 {
		t.Errorf("the old token still works after the reload: %d", code)
	}
	if code := switchWith(t, addr, "second-token"); code != 200 {
		t.Errorf("the new token is refused after the reload: %d", code)
	}
	if got := metric(t, addr, "vigil_config_last_reload_successful"); got != "1" {
		t.Errorf("vigil_config_last_reload_successful %q, want 1", got)
	}
}

func TestReloadMovesTheListener(t *testing.T) {
	f, addr := start(t)
	next := testnet.Addr(t)
	if _, err := f.a.Reload(f.config(t, next, "")); err != nil {
		t.Fatal(err)
	}
	if got := f.a.Addr().String(); got != next {
		t.Fatalf("API on %s after the reload, want %s", got, next)
	}
	if code := switchWith(t, next, "first-token"); code != 200 {
		t.Fatalf("the API does not answer on its new address: %d", code)
	}
	b, _ := os.ReadFile(filepath.Join(f.dir, "listen"))
	if strings.TrimSpace(string(b)) != "http://"+next {
		t.Errorf("listen file says %q, want http://%s", b, next)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break // the old address is closed
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the old address %s still accepts connections", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReloadRefusesWhatItCannotApply(t *testing.T) {
	f, addr := start(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	tests := []struct {
		name string
		cfg  func() *config.Config
		want string
	}{
		{"a listen address in use", func() *config.Config { return f.config(t, taken.Addr().String(), "") }, "address already in use"},
		{"an unreadable token file", func() *config.Config {
			c := f.config(t, addr, "")
			c.Control.API.TokenFile = filepath.Join(f.dir, "missing")
			return c
		}, "token_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.a.Reload(tt.cfg())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "old one stays") {
				t.Fatalf("reload error %v, want a refusal naming %q", err, tt.want)
			}
			if got := f.a.Addr().String(); got != addr {
				t.Fatalf("API moved to %s after a refused reload", got)
			}
			if code := switchWith(t, addr, "first-token"); code != 200 {
				t.Fatalf("the old settings no longer work after a refused reload: %d", code)
			}
			if got := metric(t, addr, "vigil_config_last_reload_successful"); got != "0" {
				t.Errorf("vigil_config_last_reload_successful %q after a refused reload, want 0", got)
			}
		})
	}
}

func TestReloadNamesWhatNeedsARestart(t *testing.T) {
	f, addr := start(t)
	c := f.config(t, addr, "")
	c.Control.DataDir = filepath.Join(f.dir, "elsewhere")
	res, err := f.a.Reload(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NeedRestart) != 1 || !strings.Contains(res.NeedRestart[0], "data_dir") {
		t.Fatalf("need restart %v, want data_dir", res.NeedRestart)
	}
	if !strings.Contains(f.logs.String(), "except settings that need a restart") || strings.Contains(f.logs.String(), "[INFO]  configuration reloaded:") {
		t.Errorf("the log does not say that data_dir was not applied:\n%s", f.logs.String())
	}
	if got := metric(t, addr, "vigil_config_restart_required"); got != "1" {
		t.Errorf("vigil_config_restart_required %q, want 1", got)
	}
}
