package probe

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redirects adds the redirecting handlers of the redirect tests to an
// origin's mux. other is the URL of a server on another port.
func redirects(mux *http.ServeMux, o *testOrigin, other string) {
	to := func(code int, location func() string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", location())
			w.WriteHeader(code)
		}
	}
	static := func(s string) func() string { return func() string { return s } }
	scheme := func() string { return strings.SplitN(o.url, ":", 2)[0] }
	mux.HandleFunc("/r/stalling", func(w http.ResponseWriter, r *http.Request) {
		// A redirect whose body never ends: following it must not wait
		// for the body; judging it (not following) reads it like any body.
		w.Header().Set("Location", "/health?via=stalling")
		w.WriteHeader(http.StatusFound)
		w.(http.Flusher).Flush()
		<-o.release
	})
	mux.HandleFunc("/r/slow/", func(w http.ResponseWriter, r *http.Request) {
		// /r/slow/N redirects to /r/slow/N-1 after slowHop, and
		// /r/slow/0 answers.
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/slow/"))
		select {
		case <-time.After(slowHop):
		case <-o.release:
			return
		}
		if n == 0 {
			return
		}
		w.Header().Set("Location", strconv.Itoa(n-1))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/r/relative", to(http.StatusFound, static("/health?via=relative")))
	mux.HandleFunc("/r/site", to(http.StatusMovedPermanently, func() string {
		return scheme() + "://" + siteHost + ":" + o.port + "/health?via=site"
	}))
	mux.HandleFunc("/r/site-upper-case", to(http.StatusSeeOther, func() string {
		return scheme() + "://SITE.example:" + o.port + "/health?via=upper"
	}))
	mux.HandleFunc("/r/address", to(http.StatusTemporaryRedirect, func() string { return o.url + "/health?via=address" }))
	mux.HandleFunc("/r/to-503", to(http.StatusPermanentRedirect, static("/unavailable")))
	mux.HandleFunc("/r/loop", to(http.StatusFound, static("/r/loop")))
	mux.HandleFunc("/r/other-host", to(http.StatusFound, static(other+"/landing?token=s3cret")))
	mux.HandleFunc("/r/other-port", to(http.StatusFound, func() string {
		return scheme() + "://" + siteHost + ":1/health"
	}))
	mux.HandleFunc("/r/default-port", to(http.StatusFound, func() string { return scheme() + "://" + siteHost + "/health" }))
	mux.HandleFunc("/r/other-scheme", to(http.StatusFound, func() string {
		s := "https"
		if scheme() == "https" {
			s = "http"
		}
		return s + "://" + siteHost + ":" + o.port + "/health"
	}))
	mux.HandleFunc("/r/scheme-relative", to(http.StatusFound, static("//elsewhere.example/health")))
	mux.HandleFunc("/r/not-a-url", to(http.StatusFound, static("http://[::1/x")))
	mux.HandleFunc("/r/no-location", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/r/chain/", func(w http.ResponseWriter, r *http.Request) {
		// /r/chain/N redirects to /r/chain/N-1, and /r/chain/0 answers.
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/chain/"))
		if n == 0 {
			w.Write([]byte("vigil-ok"))
			return
		}
		w.Header().Set("Location", strconv.Itoa(n-1))
		w.WriteHeader(http.StatusFound)
	})
}

func TestDoRedirects(t *testing.T) {
	ca := newTestCA(t)
	cert := leaf(t, ca, []string{siteHost}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	origins := []struct {
		name string
		o    *testOrigin
	}{
		{"HTTP/1.1", newOrigin(t, nil)},
		{"HTTP/1.1 over TLS", newOrigin(t, &cert)},
		{"HTTP/2", newH2Origin(t, &cert)},
	}
	cases := []struct {
		name    string
		path    string
		follow  bool
		want    want
		conns   int64  // connections the probe opened
		via     string // the query the final request carried, if any
		detail  string
		hasBody bool
	}{
		{"not followed by default", "/r/relative", false, want{true, OK, 302}, 1, "", "302", false},
		{"off host not followed by default", "/r/other-host", false, want{true, OK, 302}, 1, "", "302", false},
		{"redirect with a stalled body, followed", "/r/stalling", true, want{true, OK, 200}, 2, "via=stalling", "after 1 redirect", true},
		{"relative", "/r/relative", true, want{true, OK, 200}, 2, "via=relative", "after 1 redirect", true},
		{"to the site's host", "/r/site", true, want{true, OK, 200}, 2, "via=site", "after 1 redirect", true},
		{"host compared without case", "/r/site-upper-case", true, want{true, OK, 200}, 2, "via=upper", "after 1 redirect", true},
		{"to the address", "/r/address", true, want{true, OK, 200}, 2, "via=address", "after 1 redirect", true},
		{"final status counts", "/r/to-503", true, want{false, HTTP5xx, 503}, 2, "", "503", false},
		{"chain of ten", "/r/chain/10", true, want{true, OK, 200}, 11, "", "after 10 redirects", true},
		{"chain of eleven", "/r/chain/11", true, want{false, TooManyRedirects, 302}, 11, "", "after 10 redirects", false},
		{"loop", "/r/loop", true, want{false, TooManyRedirects, 302}, 11, "", "still redirecting", false},
		{"no Location is final", "/r/no-location", true, want{true, OK, 302}, 1, "", "302", false},
		{"other host", "/r/other-host", true, want{false, OffHostRedirect, 302}, 1, "", "to http://127.0.0.1:", false},
		{"other port", "/r/other-port", true, want{false, OffHostRedirect, 302}, 1, "", "site.example:1", false},
		{"the scheme's default port", "/r/default-port", true, want{false, OffHostRedirect, 302}, 1, "", "site.example:", false},
		{"other scheme", "/r/other-scheme", true, want{false, OffHostRedirect, 302}, 1, "", "redirects off the origin", false},
		{"scheme-relative to another host", "/r/scheme-relative", true, want{false, OffHostRedirect, 302}, 1, "", "elsewhere.example", false},
		{"Location not a URL", "/r/not-a-url", true, want{false, OffHostRedirect, 302}, 1, "", "not a URL", false},
	}
	for _, oc := range origins {
		t.Run(oc.name, func(t *testing.T) {
			o := oc.o
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := o.newConns.Load()
					o.requests.Delete("/health")
					req := Request{Address: o.url, Host: siteHost, Path: tc.path, RootCAs: ca.pool, FollowRedirects: tc.follow}
					if tc.hasBody {
						req.ExpectedBody = "vigil-ok"
					}
					got, err := Do(context.Background(), req)
					check(t, got, err, tc.want)
					if !strings.Contains(got.Detail, tc.detail) {
						t.Errorf("detail %q does not mention %q", got.Detail, tc.detail)
					}
					if strings.Contains(got.Detail, "s3cret") || strings.Contains(got.Detail, "landing") {
						t.Errorf("detail %q quotes the Location's path or query", got.Detail)
					}
					if !got.Up && tc.want.reason != HTTP5xx && got.Phase != PhaseHeaders {
						t.Errorf("phase %q, want %q", got.Phase, PhaseHeaders)
					}
					if n := o.newConns.Load() - before; n != tc.conns {
						t.Errorf("probe opened %d connections, want %d (one per request)", n, tc.conns)
					}
					if tc.via != "" {
						s := o.seen(t, "/health")
						if s.uri != "/health?"+tc.via || s.host != siteHost {
							t.Errorf("the redirected request was for %q with Host %q, want %q with Host %q",
								s.uri, s.host, "/health?"+tc.via, siteHost)
						}
					}
				})
			}
			if n := o.redirect.Load(); n != 0 {
				t.Errorf("the off-host redirect target got %d requests", n)
			}
		})
	}

	o := origins[0].o
	t.Run("a redirect not followed is judged with its body", func(t *testing.T) {
		// The body never ends, so the timeout always ends the probe; it
		// is long enough for the headers to come first on a loaded machine.
		got, err := Do(context.Background(), Request{Address: o.url, Host: siteHost, Path: "/r/stalling", Timeout: 3 * time.Second})
		check(t, got, err, want{false, Timeout, 302})
		if got.Phase != PhaseBody {
			t.Errorf("phase %q, want %q", got.Phase, PhaseBody)
		}
	})
	t.Run("redirects share the timeout", func(t *testing.T) {
		// Each hop is well within the timeout, all of them are not.
		const timeout = 3 * slowHop
		got, err := Do(context.Background(), Request{Address: o.url, Host: siteHost, Path: "/r/slow/6", FollowRedirects: true, Timeout: timeout})
		check(t, got, err, want{false, Timeout, 0})
		if got.Phase != PhaseHeaders || got.Duration < timeout {
			t.Errorf("phase %q after %v; want %q after the %v timeout", got.Phase, got.Duration, PhaseHeaders, timeout)
		}
		// And a short chain fits in a longer one.
		got, err = Do(context.Background(), Request{Address: o.url, Host: siteHost, Path: "/r/slow/2", FollowRedirects: true, Timeout: 10 * time.Second})
		check(t, got, err, want{true, OK, 200})
	})
}

// slowHop is how long each /r/slow/ redirect takes: long beside a
// loopback connect on a loaded machine, so that the shared timeout ends
// the probe while it waits for a hop's headers.
const slowHop = 300 * time.Millisecond
