package statuspage

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func newMux(t *testing.T, opts Options) *http.ServeMux {
	t.Helper()
	mux := http.NewServeMux()
	// The API's own routes, as core/httpapi registers them, to prove the page
	// neither conflicts with nor shadows them.
	for _, p := range []string{"GET /v1/sites", "/v1/", "GET /metrics", "GET /healthz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "api "+p) })
	}
	Register(mux, opts)
	return mux
}

func get(t *testing.T, h http.Handler, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

func TestServesAssets(t *testing.T) {
	mux := newMux(t, Options{})
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", "<title>vigil status</title>"},
		{"/ui/app.css", "text/css; charset=utf-8", ".badge"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "v1/events?after="},
		{"/ui/icon.svg", "image/svg+xml", "<svg"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := get(t, mux, tc.path)
			if r.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: status %d", tc.path, r.StatusCode)
			}
			if got := r.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.contentType)
			}
			for _, h := range []string{"Content-Security-Policy", "ETag", "X-Content-Type-Options"} {
				if r.Header.Get(h) == "" {
					t.Errorf("GET %s: no %s header", tc.path, h)
				}
			}
			if b := body(t, r); !strings.Contains(b, tc.contains) {
				t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
			}
		})
	}
}

func TestRevalidatesWithETag(t *testing.T) {
	mux := newMux(t, Options{})
	etag := get(t, mux, "/ui/app.js").Header.Get("ETag")
	if r := get(t, mux, "/ui/app.js", "If-None-Match", etag); r.StatusCode != http.StatusNotModified {
		t.Errorf("GET with If-None-Match %s: status %d, want 304", etag, r.StatusCode)
	}
}

func TestLeavesOtherRoutesAlone(t *testing.T) {
	mux := newMux(t, Options{})
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/v1/sites", 200, "api GET /v1/sites"},
		{"/v1/nodes", 200, "api /v1/"},
		{"/metrics", 200, "api GET /metrics"},
		{"/healthz", 200, "api GET /healthz"},
		{"/ui/nope.js", 404, "no such status page asset"},
		{"/ui/index.html", 404, "no such status page asset"},
		{"/elsewhere", 404, "404 page not found"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := get(t, mux, tc.path)
			b := body(t, r)
			if r.StatusCode != tc.status || !strings.Contains(b, tc.body) {
				t.Errorf("GET %s: %d %q, want %d with %q", tc.path, r.StatusCode, b, tc.status, tc.body)
			}
		})
	}
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", rec.Code)
	}
}

func TestTitleIsEscaped(t *testing.T) {
	b := body(t, get(t, newMux(t, Options{Title: `prod <eu>`}), "/"))
	if !strings.Contains(b, "<title>prod &lt;eu&gt; status</title>") || strings.Contains(b, "{{TITLE}}") {
		t.Errorf("the title is not filled in and escaped:\n%s", b)
	}
}

// xmlNamespaces are URLs that name an XML vocabulary; nothing fetches them.
var xmlNamespaces = map[string]bool{"http://www.w3.org/2000/svg": true}

var (
	absoluteURL = regexp.MustCompile(`(?i)https?://[^\s"'<>)]*`)
	// src="//host", href='//host', url(//host), import "//host".
	protocolRelative = regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*//|url\(\s*["']?\s*//|@import\s+["']//|fetch\(\s*["'\x60]//`)
)

// TestNoExternalAssets proves the page loads nothing from another host: no
// absolute http(s) URL and no protocol-relative reference in any embedded
// file.
func TestNoExternalAssets(t *testing.T) {
	n := 0
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		for _, u := range absoluteURL.FindAllString(string(b), -1) {
			if !xmlNamespaces[u] {
				t.Errorf("%s refers to another host: %s", p, u)
			}
		}
		for _, m := range protocolRelative.FindAllString(string(b), -1) {
			t.Errorf("%s has a protocol-relative reference: %s", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Fatalf("only %d embedded files; want index.html, app.css, app.js and icon.svg", n)
	}
	if _, err := load(Options{}); err != nil {
		t.Fatal(err)
	}
}
