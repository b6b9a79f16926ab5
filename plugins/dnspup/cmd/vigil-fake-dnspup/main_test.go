package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestFlags runs the binary with the flags of each mode and asks it what
// that mode should answer, over loopback.
func TestFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the binary")
	}
	bin := sdktest.Build(t, "github.com/vigilcdn/vigil/plugins/dnspup/cmd/vigil-fake-dnspup")
	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{{"-page-size", "-1"}, {"-async-polls", "-2"}} {
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), args[0]) {
				t.Errorf("%v: err %v, output %q; want a failure naming the flag", args, err, out)
			}
		}
	})
	tests := []struct {
		name   string
		args   []string
		method string
		path   string
		body   string
		status int
		has    string
	}{
		{"pages", []string{"-page-size", "1"}, "GET", "/v1/nodes", "", 200, `"next_cursor":"1"`},
		{"async", []string{"-async-polls", "2"}, "POST", "/v1/probes", `{"type":"http","target":"http://127.0.0.1:1/","nodeIds":["ams-1"]}`, 202, `"in-progress"`},
		{"rate limited", []string{"-fail", "rate_limited:3"}, "GET", "/v1/nodes", "", 429, `"rate_limited"`},
		{"5xx", []string{"-fail", "internal_error"}, "GET", "/v1/nodes", "", 500, `"internal_error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &sdktest.LogBuffer{}
			cmd := exec.Command(bin, append([]string{"-listen", "127.0.0.1:0"}, tt.args...)...)
			cmd.Stderr = logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			line := logs.WaitFor(t, time.Minute, "serving a fake dnspup API on http://127.0.0.1:")
			base := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(line)
			req, err := http.NewRequestWithContext(t.Context(), tt.method, base+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-API-Key", "k")
			req.Header.Set("X-API-Secret", "s")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.has) || !json.Valid(b) {
				t.Errorf("%s %s: %d %s; want %d with %s", tt.method, tt.path, resp.StatusCode, b, tt.status, tt.has)
			}
			if tt.name == "rate limited" && resp.Header.Get("Retry-After") != "3" {
				t.Errorf("Retry-After = %q, want 3", resp.Header.Get("Retry-After"))
			}
		})
	}
}
