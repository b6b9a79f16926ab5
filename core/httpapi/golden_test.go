package httpapi_test

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

var update = flag.Bool("update", false, "rewrite testdata/answers.golden")

const goldenConfig = `
source "direct" { plugin = "vigil-source-direct" }
source "node" { plugin = "vigil-source-node" }
site "api" {
  hostname = "api.example.com"
  failback = "manual"
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
    ramp {
      steps    = [10, 50, 100]
      interval = "1m"
    }
  }
  origin "a1" { address = "http://127.0.0.1:18011" }
  origin "b1" {
    address = "http://127.0.0.1:18013"
    level   = 2
  }
}
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

// TestAnswersAreGolden drives a small fleet through a failover, a manual
// hold, a disabled origin and a ramped switch, and compares every read
// answer and action answer with testdata/answers.golden byte for byte
// (times and the round's wall-clock latencies masked). The golden file
// was written by the engine before the read model left it
// (core/readmodel), so a difference is a change of the API's wire format.
func TestAnswersAreGolden(t *testing.T) {
	ctx := context.Background()
	src := enginetest.Sources{"direct": enginetest.NewSource("direct"), "node": enginetest.NewSource("node")}
	e, _ := enginetest.Start(t, enginetest.Config(t, goldenConfig), src, "")
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: e, Token: "t", MaxWait: 5 * time.Second}))
	t.Cleanup(srv.Close)

	var out strings.Builder
	get := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer t")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("== " + method + " " + path + " " + resp.Status + "\n")
		out.Write(b)
		if len(b) == 0 || b[len(b)-1] != '\n' {
			out.WriteByte('\n')
		}
	}
	reads := func() {
		get("GET", "/v1/sites", "")
		get("GET", "/v1/sites/www", "")
		get("GET", "/v1/sites/api", "")
		get("GET", "/v1/sites?problem=true&limit=1", "")
		get("GET", "/v1/summary", "")
	}
	reads() // before the first round
	src["direct"].SetDown("www", "a1", true)
	src["direct"].SetDown("api", "a1", true)
	src["node"].SetDown("www", "a1", true)
	src["node"].SetMute("api", "a1", true)
	src["direct"].SetMute("www", "b1", true) // so the node source settles it
	for range 3 {
		e.RunRound(ctx)
	}
	reads() // failed over
	src["direct"].SetDown("www", "a1", false)
	src["direct"].SetDown("api", "a1", false)
	src["node"].SetDown("www", "a1", false)
	e.RunRound(ctx)
	reads() // api waits for a manual failback
	get("POST", "/v1/sites/www/switch", `{"level": 2}`)
	get("POST", "/v1/sites/www/origins/a2/disable", "")
	get("POST", "/v1/sites/www/origins/a2/disable", "")
	get("POST", "/v1/sites/api/switch", `{"level": 1, "ramp": true}`)
	e.RunRound(ctx)
	reads()
	get("POST", "/v1/sites/www/origins/a2/enable", "")
	get("GET", "/v1/events", "")
	get("GET", "/v1/events?site=api&after=2", "")

	got := mask(out.String())
	path := filepath.Join("testdata", "answers.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestAnswersAreGolden -update writes it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("the answers differ from %s at line %d:\ngot  %s\nwant %s", path, i+1, g, w)
			}
		}
	}
}

var (
	timesRe   = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)"`)
	latencyRe = regexp.MustCompile(`"latency_ms": ?[0-9.e+-]+`)
	// secondsRe are the failover reports' measured durations.
	secondsRe = regexp.MustCompile(`"((?:detect|commit|publish|edge|total|last_request)_seconds)": ?[0-9.e+-]+`)
)

// mask hides what differs from run to run: times, measured latencies and
// durations.
func mask(s string) string {
	s = timesRe.ReplaceAllString(s, `"<time>"`)
	s = secondsRe.ReplaceAllString(s, `"$1":<s>`)
	return latencyRe.ReplaceAllString(s, `"latency_ms":<ms>`)
}
