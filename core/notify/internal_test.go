package notify

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header string
		want   time.Duration
		ok     bool
	}{
		{"seconds", "120", 2 * time.Minute, true},
		{"zero seconds", "0", 0, true},
		{"spaces", " 3 ", 3 * time.Second, true},
		{"http date", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"date in the past", now.Add(-time.Minute).Format(http.TimeFormat), 0, false},
		{"negative", "-5", 0, false},
		{"garbage", "soon", 0, false},
		{"empty", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := retryAfter(tt.header, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("retryAfter(%q) = %s, %v; want %s, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestExponentialBackoff(t *testing.T) {
	tests := []struct {
		attempt  int
		min, max time.Duration // the bounds of the draw
	}{
		{0, 500 * time.Millisecond, time.Second},
		{1, time.Second, 2 * time.Second},
		{3, 4 * time.Second, 8 * time.Second},
		{6, 30 * time.Second, time.Minute},
		{200, 30 * time.Second, time.Minute},
	}
	for _, tt := range tests {
		for range 100 {
			if d := exponential(time.Second, time.Minute, tt.attempt); d < tt.min || d > tt.max {
				t.Fatalf("attempt %d waited %s, want within [%s, %s]", tt.attempt, d, tt.min, tt.max)
			}
		}
	}
}

func TestRedactor(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		target  string
		secrets []string
	}{
		{"slack path", "https://hooks.slack.com/services/T0001/B0002/XXXXSECRET", "https://hooks.slack.com", []string{"T0001", "B0002", "XXXXSECRET"}},
		{"query token", "http://127.0.0.1:9000/hook?token=abc%2Fdef&x=1", "http://127.0.0.1:9000", []string{"abc/def", "abc%2Fdef", "token=abc"}},
		{"user info", "https://bob:s3cr3t@am.example.net/api/v2/alerts", "https://am.example.net", []string{"s3cr3t", "bob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRedactor(tt.url)
			if r.target != tt.target {
				t.Fatalf("target %q, want %q", r.target, tt.target)
			}
			u, _ := url.Parse(tt.url)
			texts := []string{
				r.Error(&url.Error{Op: "Post", URL: tt.url, Err: errors.New("connection refused")}),
				r.String("upstream said: bad request for " + u.String()),
				r.String("echo: " + u.RequestURI()),
			}
			w := &webhook{redact: r}
			texts = append(texts, w.describe(&url.Error{Op: "Post", URL: u.Redacted(), Err: errors.New("timeout")}))
			for _, text := range texts {
				for _, s := range tt.secrets {
					if strings.Contains(text, s) {
						t.Errorf("%q holds %q", text, s)
					}
				}
			}
			if got := texts[3]; got != "Post "+tt.target+": timeout" {
				t.Errorf("describe: %q", got)
			}
		})
	}
}
