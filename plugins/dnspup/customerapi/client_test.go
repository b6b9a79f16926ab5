package customerapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
)

const (
	testKey    = "key-3f9c2a7d5e"
	testSecret = "sec-8b1e4d6f0a"
)

func newFake(t *testing.T) (*fakeapi.Server, string) {
	t.Helper()
	fake := fakeapi.New(fakeapi.Options{
		Key: testKey, Secret: testSecret,
		Probe: func(context.Context, string) fakeapi.Result { return fakeapi.Result{Status: 200, LatencyMs: 12} },
	})
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	return fake, hs.URL
}

func newClient(t *testing.T, base string) *customerapi.Client {
	t.Helper()
	c, err := customerapi.New(customerapi.Config{
		BaseURL: base, Key: customerapi.NewSecret(testKey), Secret: customerapi.NewSecret(testSecret),
		RetryWaitMin: time.Millisecond, RetryWaitMax: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRequestShape(t *testing.T) {
	fake, base := newFake(t)
	c := newClient(t, base)
	ctx := t.Context()

	if err := c.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 3 || nodes[0].ID != "ams-1" {
		t.Fatalf("Nodes = %v, %v", nodes, err)
	}
	res, err := c.Probe(ctx, customerapi.ProbeRequest{Type: "http", Target: "https://203.0.113.10/health", IPVersion: "4", Count: 1, Method: "GET", NodeIDs: []string{"fra-1"}})
	if err != nil || len(res.Checkpoints) != 1 || res.Checkpoints[0].Outcome != customerapi.OutcomeUp {
		t.Fatalf("Probe = %+v, %v", res, err)
	}
	batch, err := c.BatchProbe(ctx, customerapi.BatchProbeRequest{Type: "http", Targets: []string{"http://a.test/h", "http://b.test/h"}, IPVersion: "6", Count: 1, Method: "GET"})
	if err != nil || len(batch) != 2 || len(batch[1].Checkpoints) != 3 {
		t.Fatalf("BatchProbe = %+v, %v", batch, err)
	}

	reqs := fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("got %d requests, want 4", len(reqs))
	}
	tests := []struct {
		method, path string
		auth         bool
		body         map[string]any
	}{
		{"GET", "/v1/health", false, nil},
		{"GET", "/v1/nodes", true, nil},
		{"POST", "/v1/probes", true, map[string]any{"type": "http", "target": "https://203.0.113.10/health", "ipVersion": "4", "count": 1.0, "method": "GET", "nodeIds": []any{"fra-1"}}},
		{"POST", "/v1/batch-probes", true, map[string]any{"type": "http", "targets": []any{"http://a.test/h", "http://b.test/h"}, "ipVersion": "6", "count": 1.0, "method": "GET"}},
	}
	for i, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := reqs[i]
			if r.Method != tt.method || r.Path != tt.path {
				t.Fatalf("request %d = %s %s", i, r.Method, r.Path)
			}
			key, secret := r.Header.Get("X-API-Key"), r.Header.Get("X-API-Secret")
			if tt.auth && (key != testKey || secret != testSecret) {
				t.Errorf("auth headers = %q/%q, want the credentials", key, secret)
			}
			if !tt.auth && (key != "" || secret != "") {
				t.Errorf("credentials sent to an endpoint without auth")
			}
			if got := r.Header.Get("Accept"); got != "application/json" {
				t.Errorf("Accept = %q", got)
			}
			if tt.body == nil {
				if len(r.Body) != 0 {
					t.Errorf("unexpected body %s", r.Body)
				}
				return
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var got map[string]any
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.body) {
				t.Errorf("body = %v\nwant   %v", got, tt.body)
			}
		})
	}
}

// TestErrorTable checks every row of the documented error table: the class,
// the Retry-After, and how many requests the client sent for one call.
func TestErrorTable(t *testing.T) {
	tests := []struct {
		code       string
		status     int
		class      customerapi.Class
		retryAfter time.Duration
		postSends  int // requests for one POST call (RetryMax 2)
		getSends   int // requests for one GET call
	}{
		{customerapi.CodeInvalidRequest, 400, customerapi.ClassInvalid, 0, 1, 1},
		{customerapi.CodeInvalidNodes, 400, customerapi.ClassInvalid, 0, 1, 1},
		{customerapi.CodeTrustedDNSResolutionFailed, 400, customerapi.ClassInvalid, 0, 1, 1},
		{customerapi.CodeUnauthorized, 401, customerapi.ClassUnauthorized, 0, 1, 1},
		{customerapi.CodeSourceForbidden, 403, customerapi.ClassForbidden, 0, 1, 1},
		{customerapi.CodeTargetRestricted, 403, customerapi.ClassForbidden, 0, 1, 1},
		{customerapi.CodeToolNotAllowed, 403, customerapi.ClassForbidden, 0, 1, 1},
		{customerapi.CodeEntitlementExceeded, 409, customerapi.ClassEntitlement, 0, 1, 1},
		{customerapi.CodeQuotaExceeded, 429, customerapi.ClassQuota, 0, 1, 1},
		// Retry-After longer than RetryWaitMax: not waited for in the call.
		{customerapi.CodeRateLimited, 429, customerapi.ClassRateLimited, 7 * time.Second, 1, 1},
		{customerapi.CodeCapacityLimited, 429, customerapi.ClassRateLimited, 9 * time.Second, 1, 1},
		// Without Retry-After: retried with backoff (never accepted, so free).
		{customerapi.CodeRateLimited, 429, customerapi.ClassRateLimited, 0, 3, 3},
		{customerapi.CodeServiceUnavailable, 503, customerapi.ClassUnavailable, 0, 3, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s_retry_after_%s", tt.code, tt.retryAfter), func(t *testing.T) {
			fake, base := newFake(t)
			c := newClient(t, base)
			fake.FailNext(tt.code, tt.retryAfter, 0)

			_, err := c.Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"})
			var ae *customerapi.Error
			if !errors.As(err, &ae) {
				t.Fatalf("Probe error = %v, want *api.Error", err)
			}
			if ae.Status != tt.status || ae.Code != tt.code || ae.Class() != tt.class || ae.RetryAfter != tt.retryAfter {
				t.Errorf("got status %d code %q class %v retry-after %s", ae.Status, ae.Code, ae.Class(), ae.RetryAfter)
			}
			if n := fake.Count("/v1/probes"); n != tt.postSends {
				t.Errorf("POST sent %d times, want %d", n, tt.postSends)
			}
			if n := fake.Accepted(); n != 0 {
				t.Errorf("accepted = %d, want 0", n)
			}
			if _, err := c.Nodes(t.Context()); !errors.As(err, &ae) || ae.Class() != tt.class {
				t.Errorf("Nodes error = %v", err)
			}
			if n := fake.Count("/v1/nodes"); n != tt.getSends {
				t.Errorf("GET sent %d times, want %d", n, tt.getSends)
			}
		})
	}
}

func TestClassFallsBackOnStatus(t *testing.T) {
	tests := []struct {
		status int
		want   customerapi.Class
	}{{400, customerapi.ClassInvalid}, {401, customerapi.ClassUnauthorized}, {403, customerapi.ClassForbidden}, {409, customerapi.ClassEntitlement}, {429, customerapi.ClassRateLimited}, {503, customerapi.ClassUnavailable}, {500, customerapi.ClassUnknown}, {418, customerapi.ClassUnknown}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				fmt.Fprint(w, `<html>not the envelope</html>`)
			}))
			t.Cleanup(hs.Close)
			_, err := newClient(t, hs.URL).Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"})
			var ae *customerapi.Error
			if !errors.As(err, &ae) || ae.Class() != tt.want || ae.Code != "" {
				t.Fatalf("error = %v, class %v; want class %v", err, ae.Class(), tt.want)
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	fake, base := newFake(t)
	c, err := customerapi.New(customerapi.Config{BaseURL: base, Key: customerapi.NewSecret(testKey), Secret: customerapi.NewSecret(testSecret), RetryWaitMax: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fake.FailNext(customerapi.CodeRateLimited, time.Second, 1)
	start := time.Now()
	if _, err := c.Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"}); err != nil {
		t.Fatalf("Probe after one rate limit: %v", err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %s, before Retry-After (1s)", d)
	}
	if n := fake.Count("/v1/probes"); n != 2 {
		t.Errorf("POST sent %d times, want 2", n)
	}
}

func TestRetryAfterBeyondDeadlineIsReturned(t *testing.T) {
	fake, base := newFake(t)
	c, err := customerapi.New(customerapi.Config{BaseURL: base, Key: customerapi.NewSecret(testKey), Secret: customerapi.NewSecret(testSecret), RetryWaitMax: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fake.FailNext(customerapi.CodeCapacityLimited, 2*time.Second, 0)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = c.Probe(ctx, customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"})
	var ae *customerapi.Error
	if !errors.As(err, &ae) || ae.RetryAfter != 2*time.Second {
		t.Fatalf("error = %v, want capacity_limited with Retry-After", err)
	}
	if n := fake.Count("/v1/probes"); n != 1 {
		t.Errorf("POST sent %d times, want 1", n)
	}
}

// TestPostNeverRetriedOnceSent: a connection that dies after the request
// went out, or a timeout, may hide an accepted (charged) request.
func TestPostNeverRetriedOnceSent(t *testing.T) {
	var hits atomic.Int32
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Mode") == "hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // drop the connection without an answer
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // runs before hs.Close

	c := newClient(t, hs.URL)

	t.Run("connection dropped", func(t *testing.T) {
		hits.Store(0)
		_, err := c.Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"})
		var te *customerapi.TransportError
		if !errors.As(err, &te) || !te.Sent {
			t.Fatalf("error = %v, want a TransportError with Sent", err)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("POST sent %d times, want 1", n)
		}
		hits.Store(0)
		if _, err := c.Nodes(t.Context()); err == nil {
			t.Fatal("Nodes succeeded")
		}
		if n := hits.Load(); n != 3 {
			t.Errorf("GET sent %d times, want 3 (retried)", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		hits.Store(0)
		hc := &http.Client{Transport: headerTransport{"X-Mode", "hang"}}
		c, err := customerapi.New(customerapi.Config{BaseURL: hs.URL, Key: customerapi.NewSecret(testKey), Secret: customerapi.NewSecret(testSecret), HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err = c.Probe(ctx, customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"})
		var te *customerapi.TransportError
		if !errors.As(err, &te) || !te.Sent || !te.Timeout {
			t.Fatalf("error = %v, want a sent, timed-out TransportError", err)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("POST sent %d times, want 1", n)
		}
	})
}

type headerTransport struct{ k, v string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return http.DefaultTransport.RoundTrip(r)
}

func TestDialFailureIsNotSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = newClient(t, "http://"+addr).Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"})
	var te *customerapi.TransportError
	if !errors.As(err, &te) || te.Sent {
		t.Fatalf("error = %v, want a TransportError that was not sent", err)
	}
}

// TestSecretsNeverInErrors: even a server that echoes the credentials back
// cannot get them into an error string, and a Config prints redacted.
func TestSecretsNeverInErrors(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"code":"unauthorized","message":"bad key %s / secret %s"}}`, r.Header.Get("X-API-Key"), r.Header.Get("X-API-Secret"))
	}))
	t.Cleanup(hs.Close)
	cfg := customerapi.Config{BaseURL: hs.URL, Key: customerapi.NewSecret(testKey), Secret: customerapi.NewSecret(testSecret)}
	c, err := customerapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Probe(t.Context(), customerapi.ProbeRequest{Type: "http", Target: "http://a.test/"})
	if err == nil {
		t.Fatal("no error")
	}
	js, _ := json.Marshal([]customerapi.Secret{cfg.Key, cfg.Secret})
	texts := []string{err.Error(), fmt.Sprintf("%v %+v %#v", err, cfg, cfg), string(js)}
	var ae *customerapi.Error
	if errors.As(err, &ae) {
		texts = append(texts, ae.Message, fmt.Sprintf("%#v", ae))
	}
	for _, s := range texts {
		if strings.Contains(s, testKey) || strings.Contains(s, testSecret) {
			t.Errorf("secret leaked: %s", s)
		}
	}
	if _, err := customerapi.New(customerapi.Config{BaseURL: "https://user:" + testSecret + "@api.test"}); err == nil || strings.Contains(err.Error(), testSecret) {
		t.Errorf("api_base with credentials: err = %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"5", 5 * time.Second, true},
		{"0", 0, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := customerapi.ParseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter(%q) = %s, %v; want %s, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
	for range 100 {
		if d := customerapi.WithJitter(time.Second); d < time.Second || d > 1350*time.Millisecond {
			t.Fatalf("WithJitter(1s) = %s", d)
		}
	}
}
