package statuspage

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Options configure the status page. The zero value is ready to use.
type Options struct {
	// Title replaces "vigil" in the page's title and heading, such as the
	// name of the environment ("vigil production").
	Title string
}

// contentSecurityPolicy allows the page its own assets and API only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// load reads every embedded file; the page's title is filled in here.
func load(opts Options) (map[string]*asset, error) {
	title := strings.TrimSpace(opts.Title)
	if title == "" {
		title = "vigil"
	}
	out := map[string]*asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return fmt.Errorf("reading embedded %s: %w", p, err)
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("embedded %s: no content type for %q; add it to contentTypes", p, path.Ext(p))
		}
		name := strings.TrimPrefix(p, "assets/")
		if name == "index.html" {
			b = bytes.ReplaceAll(b, []byte("{{TITLE}}"), []byte(htmlEscape(title)))
		}
		sum := sha256.Sum256(b)
		out[name] = &asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("status page assets: %w", err)
	}
	return out, nil
}

func htmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")
	return r.Replace(s)
}

// Register adds the status page to mux: GET / and GET /ui/{name}. It
// panics only if the embedded assets are broken, which the package's tests
// rule out.
func Register(mux *http.ServeMux, opts Options) {
	files, err := load(opts)
	if err != nil {
		panic(err)
	}
	mux.Handle("GET /{$}", serve(files["index.html"]))
	mux.HandleFunc("GET /ui/{name}", func(w http.ResponseWriter, r *http.Request) {
		a := files[r.PathValue("name")]
		if a == nil || r.PathValue("name") == "index.html" {
			http.Error(w, "no such status page asset; the page is at /", http.StatusNotFound)
			return
		}
		serve(a).ServeHTTP(w, r)
	})
}

// serve writes one asset with its type, an ETag (the binary is the
// version, so browsers revalidate) and the page's security headers.
func serve(a *asset) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}
