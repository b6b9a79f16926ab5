package fakeapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
)

func do(t *testing.T, method, url, body string, auth bool) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("X-API-Key", "k")
		req.Header.Set("X-API-Secret", "s")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func newServer(t *testing.T) (*fakeapi.Server, string) {
	fake := fakeapi.New(fakeapi.Options{Key: "k", Secret: "s",
		Probe: func(context.Context, string) fakeapi.Result { return fakeapi.Result{Status: 200} }})
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	return fake, hs.URL
}

func TestContract(t *testing.T) {
	_, url := newServer(t)
	tests := []struct {
		name, method, path, body string
		auth                     bool
		status                   int
		has                      string
	}{
		{"health needs no auth", "GET", "/v1/health", "", false, 200, `"ok"`},
		{"nodes need auth", "GET", "/v1/nodes", "", false, 401, `"unauthorized"`},
		{"nodes", "GET", "/v1/nodes", "", true, 200, `"fra-1"`},
		{"probe", "POST", "/v1/probes", `{"type":"http","target":"http://a.test/h","nodeIds":["fra-1"]}`, true, 200, `"results":[{"nodeId":"fra-1","status":200}]`},
		{"batch", "POST", "/v1/batch-probes", `{"type":"http","targets":["http://a.test/h"]}`, true, 200, `"target":"http://a.test/h"`},
		{"unknown node", "POST", "/v1/probes", `{"type":"http","target":"http://a.test/h","nodeIds":["mars"]}`, true, 400, `"invalid_nodes"`},
		{"bad target", "POST", "/v1/probes", `{"type":"http","target":"a.test"}`, true, 400, `"invalid_request"`},
		{"bad json", "POST", "/v1/probes", `{`, true, 400, `"invalid_request"`},
		{"bad ip version", "POST", "/v1/probes", `{"type":"http","target":"http://a.test/","ipVersion":"5"}`, true, 400, `"invalid_request"`},
		{"unknown fields ignored", "POST", "/v1/probes", `{"type":"http","target":"http://a.test/","future":1}`, true, 200, `"results"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, tt.method, url+tt.path, tt.body, tt.auth)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.has) {
				t.Errorf("%d %s, want %d with %s", resp.StatusCode, body, tt.status, tt.has)
			}
		})
	}
}

func TestEveryErrorCode(t *testing.T) {
	table := map[string]int{ // the documented error table
		customerapi.CodeInvalidRequest: 400, customerapi.CodeInvalidNodes: 400, customerapi.CodeTrustedDNSResolutionFailed: 400,
		customerapi.CodeUnauthorized: 401, customerapi.CodeSourceForbidden: 403, customerapi.CodeTargetRestricted: 403,
		customerapi.CodeToolNotAllowed: 403, customerapi.CodeEntitlementExceeded: 409, customerapi.CodeQuotaExceeded: 429,
		customerapi.CodeRateLimited: 429, customerapi.CodeCapacityLimited: 429, customerapi.CodeServiceUnavailable: 503,
	}
	for code, status := range table {
		t.Run(code, func(t *testing.T) {
			fake, url := newServer(t)
			fake.FailNext(code, 1500*time.Millisecond, 1)
			resp, body := do(t, "POST", url+"/v1/probes", `{"type":"http","target":"http://a.test/"}`, true)
			var env struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error.Code != code || env.Error.Message == "" {
				t.Fatalf("body %s", body)
			}
			if resp.StatusCode != status {
				t.Errorf("status %d for %s", resp.StatusCode, code)
			}
			if ra := resp.Header.Get("Retry-After"); ra != "2" {
				t.Errorf("Retry-After = %q, want 2 (whole seconds, rounded up)", ra)
			}
			if resp, _ := do(t, "POST", url+"/v1/probes", `{"type":"http","target":"http://a.test/"}`, true); resp.StatusCode != 200 {
				t.Errorf("the failure outlived its count: %d", resp.StatusCode)
			}
			if fake.Accepted() != 1 || fake.Count("/v1/probes") != 2 {
				t.Errorf("accepted %d, received %d", fake.Accepted(), fake.Count("/v1/probes"))
			}
		})
	}
}

func TestQuotaAndControl(t *testing.T) {
	fake, url := newServer(t)
	fake.SetQuota(1)
	probe := `{"type":"http","target":"http://a.test/"}`
	if resp, _ := do(t, "POST", url+"/v1/probes", probe, true); resp.StatusCode != 200 {
		t.Fatalf("first probe: %d", resp.StatusCode)
	}
	if _, body := do(t, "POST", url+"/v1/probes", probe, true); !strings.Contains(body, "quota_exceeded") {
		t.Fatalf("second probe: %s", body)
	}
	fake.SetQuota(-1)

	steps := []struct{ path, body, want string }{
		{"/_fake/node", `{"nodeId":"fra-1","error":"timeout"}`, `{"error":"timeout","nodeId":"fra-1"}`},
		{"/_fake/fail", `{"code":"capacity_limited","retryAfter":3,"count":1}`, `"capacity_limited"`},
	}
	for _, s := range steps {
		if resp, body := do(t, "POST", url+s.path, s.body, false); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", s.path, resp.StatusCode, body)
		}
		_, body := do(t, "POST", url+"/v1/probes", probe, true)
		if !strings.Contains(body, s.want) {
			t.Errorf("after %s: %s", s.path, body)
		}
	}
	_, body := do(t, "GET", url+"/_fake/stats", "", false)
	var stats struct {
		Requests map[string]int
		Accepted int
	}
	if err := json.Unmarshal([]byte(body), &stats); err != nil || stats.Requests["/v1/probes"] != 4 || stats.Accepted != 2 {
		t.Errorf("stats %s", body)
	}
}

func TestFetchProbe(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(hs.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	probe := fakeapi.FetchProbe(2 * time.Second)
	tests := []struct {
		target string
		want   string
	}{
		{hs.URL + "/moved", "302"},
		{hs.URL + "/x", "503"},
		{closedURL + "/x", "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			r := probe(t.Context(), tt.target)
			if got := fmt.Sprint(r.Status) + r.Error; !strings.Contains(got, tt.want) {
				t.Errorf("probe = %+v, want %s", r, tt.want)
			}
		})
	}
}

// TestDelay: a delayed probe answer waits, the request still costs quota
// when the client gives up first, and the control endpoint sets and clears
// the delay.
func TestDelay(t *testing.T) {
	fake, url := newServer(t)
	fake.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/probes", strings.NewReader(`{"type":"http","target":"http://a.test/"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "k")
	req.Header.Set("X-API-Secret", "s")
	arrived := fake.Arrived()
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-arrived:
	case err := <-errc:
		t.Fatalf("the request ended before the server saw it: %v", err)
	}
	cancel() // the client gives up while the answer is delayed
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a delayed probe was answered at once")
		}
	case <-time.After(time.Minute):
		t.Fatal("the client did not return after giving up")
	}
	if n := fake.Accepted(); n != 1 {
		t.Errorf("accepted = %d, want 1 (a delayed request still costs quota)", n)
	}

	if resp, body := do(t, "POST", url+"/_fake/delay", `{"seconds":-1}`, false); resp.StatusCode != 400 {
		t.Errorf("negative delay: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", url+"/_fake/delay", `{"seconds":0}`, false); resp.StatusCode != 200 {
		t.Fatalf("clear the delay: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", url+"/v1/probes", `{"type":"http","target":"http://a.test/"}`, true); resp.StatusCode != 200 {
		t.Errorf("after clearing the delay: %d %s", resp.StatusCode, body)
	}
}

func TestPagination(t *testing.T) {
	fake, url := newServer(t)
	fake.SetPageSize(2)
	resp, body := do(t, "GET", url+"/v1/nodes", "", true)
	if resp.StatusCode != 200 || !strings.Contains(body, `"next_cursor":"2"`) || !strings.Contains(body, `"fra-1"`) || strings.Contains(body, `"nyc-1"`) {
		t.Fatalf("page 1: %d %s", resp.StatusCode, body)
	}
	if l := resp.Header.Get("Link"); l != `</v1/nodes?cursor=2>; rel="next"` {
		t.Errorf("Link = %q", l)
	}
	resp, body = do(t, "GET", url+"/v1/nodes?cursor=2", "", true)
	if resp.StatusCode != 200 || !strings.Contains(body, `"nyc-1"`) || strings.Contains(body, "next_cursor") || resp.Header.Get("Link") != "" {
		t.Fatalf("page 2: %d %s (Link %q)", resp.StatusCode, body, resp.Header.Get("Link"))
	}
	resp, body = do(t, "GET", url+"/v1/nodes?cursor=x", "", true)
	if resp.StatusCode != 400 || !strings.Contains(body, "cursor") {
		t.Fatalf("bad cursor: %d %s", resp.StatusCode, body)
	}
}

func TestAsync(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		body  string
		polls int
	}{
		{"probe ready at the first poll", "/v1/probes", `{"type":"http","target":"http://a.test/h","nodeIds":["fra-1"]}`, 1},
		{"batch ready at the third poll", "/v1/batch-probes", `{"type":"http","targets":["http://a.test/h"]}`, 3},
		{"never ready", "/v1/probes", `{"type":"http","target":"http://a.test/h"}`, fakeapi.AsyncNever},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, url := newServer(t)
			fake.SetAsync(tt.polls)
			resp, body := do(t, "POST", url+tt.path, tt.body, true)
			var acc struct{ ID, Status string }
			if resp.StatusCode != 202 || json.Unmarshal([]byte(body), &acc) != nil || acc.ID == "" || acc.Status != "in-progress" {
				t.Fatalf("POST: %d %s", resp.StatusCode, body)
			}
			if loc := resp.Header.Get("Location"); loc != tt.path+"/"+acc.ID {
				t.Errorf("Location = %q", loc)
			}
			if fake.Accepted() != 1 {
				t.Errorf("accepted = %d, want 1", fake.Accepted())
			}
			n := tt.polls
			if n < 0 {
				n = 5
			}
			for i := 1; i <= n; i++ {
				resp, body = do(t, "GET", url+tt.path+"/"+acc.ID, "", true)
				want := 202
				if i == tt.polls {
					want = 200
				}
				if resp.StatusCode != want {
					t.Fatalf("poll %d: %d %s, want %d", i, resp.StatusCode, body, want)
				}
			}
			if tt.polls > 0 && !strings.Contains(body, `"results"`) {
				t.Errorf("ready answer has no results: %s", body)
			}
			if fake.Accepted() != 1 {
				t.Errorf("polls cost quota: accepted = %d, want 1", fake.Accepted())
			}
			if resp, _ := do(t, "GET", url+tt.path+"/nope", "", true); resp.StatusCode != 404 {
				t.Errorf("unknown id: %d, want 404", resp.StatusCode)
			}
		})
	}
}

func TestServerErrorAndRateLimit(t *testing.T) {
	tests := []struct {
		code   string
		status int
		ra     string
	}{
		{"internal_error", 500, ""},
		{customerapi.CodeServiceUnavailable, 503, ""},
		{customerapi.CodeRateLimited, 429, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			fake, url := newServer(t)
			fake.FailNext(tt.code, 2*time.Second*time.Duration(len(tt.ra)), 1)
			resp, body := do(t, "GET", url+"/v1/nodes", "", true)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.code) || resp.Header.Get("Retry-After") != tt.ra {
				t.Fatalf("%d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
			if resp, _ := do(t, "GET", url+"/v1/nodes", "", true); resp.StatusCode != 200 {
				t.Fatalf("after the scripted failure: %d", resp.StatusCode)
			}
		})
	}
}
