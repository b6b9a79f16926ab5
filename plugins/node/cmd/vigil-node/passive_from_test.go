package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// -passive-from and -passive-interval reach the agent's config; bad values
// are refused with the flag's name and what to write.
func TestPassiveFromFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		from     []string
		interval time.Duration
		wantErr  string
	}{
		{"defaults", nil, nil, time.Second, ""},
		{"haproxy", []string{"-passive-from", "haproxy", "-passive-interval", "500ms"}, []string{"haproxy"}, 500 * time.Millisecond, ""},
		{"an nginx log and the proxy", []string{"-passive-from", "nginx-log:/var/log/nginx/vigil.json,proxy"}, []string{"nginx-log:/var/log/nginx/vigil.json", "proxy"}, time.Second, ""},
		{"none", []string{"-passive-from", "none"}, []string{}, time.Second, ""},
		{"unknown source", []string{"-passive-from", "varnish"}, nil, 0, `-passive-from "varnish": use proxy`},
		{"log without a path", []string{"-passive-from", "nginx-log:"}, nil, 0, "write nginx-log:PATH"},
		{"zero interval", []string{"-passive-interval", "0s"}, nil, 0, "-passive-interval 0s: give how often"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := captureAgent(t)
			err := run(append([]string{"-control-plane", "http://127.0.0.1:1"}, tc.args...))
			if tc.wantErr != "" {
				if err == nil || errors.Is(err, errStop) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("run: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if !errors.Is(err, errStop) {
				t.Fatalf("run: %v", err)
			}
			if strings.Join(got.PassiveFrom, "|") != strings.Join(tc.from, "|") || (got.PassiveFrom == nil) != (tc.from == nil) || got.PassiveInterval != tc.interval {
				t.Fatalf("PassiveFrom %#v, PassiveInterval %v; want %#v, %v", got.PassiveFrom, got.PassiveInterval, tc.from, tc.interval)
			}
		})
	}
}
