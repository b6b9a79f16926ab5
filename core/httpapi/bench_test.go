package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/httpapi"
)

// BenchmarkReadAnswers is the cost of the read routes on a fleet of 2,000
// sites after a round in which every origin was judged: a page of 100
// sites (which counts the whole fleet by status first), a filtered page,
// one site, and the summary. Each answer is built from the engine's
// snapshot by the read model.
func BenchmarkReadAnswers(b *testing.B) {
	const sites = 2000
	var cfg strings.Builder
	cfg.WriteString("control { sites_per_round = 2000 }\nsource \"direct\" { plugin = \"vigil-source-direct\" }\n")
	for i := range sites {
		fmt.Fprintf(&cfg, "site \"s%04d\" {\n  hostname = \"s%04d.example.com\"\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"a2\" { address = \"http://127.0.0.1:3\" }\n  origin \"b\" {\n    address = \"http://127.0.0.1:2\"\n    level = 2\n  }\n}\n", i, i)
	}
	src := enginetest.Sources{"direct": enginetest.NewSource("direct")}
	e, _ := enginetest.Start(b, enginetest.Config(b, cfg.String()), src, "")
	for i := 0; i < sites; i += 7 {
		src["direct"].SetDown(fmt.Sprintf("s%04d", i), "a", true)
	}
	for range 3 {
		e.RunRound(context.Background())
	}
	h := httpapi.New(httpapi.Options{Engine: e})
	for _, path := range []string{"/v1/sites?limit=100", "/v1/sites?problem=true&limit=100", "/v1/sites/s0007", "/v1/summary"} {
		b.Run(strings.TrimPrefix(path, "/v1/"), func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", path, w.Code, w.Body)
				}
			}
		})
	}
}
