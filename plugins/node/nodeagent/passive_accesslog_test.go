package nodeagent

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/sdk/publication"
)

func TestParseAccessLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       []logAttempt
		wantErr    string
	}{
		{"one attempt", `{"upstream_addr":"127.0.0.1:8081","upstream_status":"200","upstream_response_time":"0.012","upstream_retry_after":"","request_method":"GET","uri":"/a"}`,
			[]logAttempt{{Addr: "127.0.0.1:8081", Status: 200, Latency: 12 * time.Millisecond, Method: "GET", Path: "/a"}}, ""},
		{"a retry: each attempt an outcome", `{"upstream_addr":"127.0.0.1:8081, 127.0.0.1:8082","upstream_status":"502, 200","upstream_response_time":"0.001, 0.004","upstream_retry_after":"-, -","request_method":"GET","uri":"/p"}`,
			[]logAttempt{{Addr: "127.0.0.1:8081", Status: 502, Latency: time.Millisecond, Method: "GET", Path: "/p"}, {Addr: "127.0.0.1:8082", Status: 200, Latency: 4 * time.Millisecond, Method: "GET", Path: "/p"}}, ""},
		{"an internal redirect's groups", `{"upstream_addr":"127.0.0.1:8081 : [::1]:8082","upstream_status":"503 : 200","upstream_response_time":"0.001 : 0.002","upstream_retry_after":"5 : -","request_method":"HEAD","uri":"/x"}`,
			[]logAttempt{{Addr: "127.0.0.1:8081", Status: 503, RetryAfter: true, Latency: time.Millisecond, Method: "HEAD", Path: "/x"}, {Addr: "[::1]:8082", Status: 200, Latency: 2 * time.Millisecond, Method: "HEAD", Path: "/x"}}, ""},
		{"no response, an upstream group's name left out", `{"upstream_addr":"127.0.0.1:8081, vigil_www","upstream_status":"-, 502","upstream_response_time":"-, 0.000","request_method":"GET","uri":"/"}`,
			[]logAttempt{{Addr: "127.0.0.1:8081", Latency: -1, Method: "GET", Path: "/"}}, ""},
		{"nginx answered itself", `{"upstream_addr":"","upstream_status":"","upstream_response_time":"","request_method":"GET","uri":"/"}`, nil, ""},
		{"blank line", "  ", nil, ""},
		{"not JSON", `127.0.0.1 - - [02/Dec/2026] "GET / HTTP/1.1" 200`, nil, "not a JSON line of log_format vigil"},
		{"another format", `{"status":"200"}`, nil, "no upstream_addr"},
		{"lists of different lengths", `{"upstream_addr":"127.0.0.1:1, 127.0.0.1:2","upstream_status":"200"}`, nil, "2 upstream addresses but 1 statuses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAccessLine([]byte(tc.line))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseAccessLine = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// FuzzAccessLogLine: any line parses without a panic, and every attempt
// it gives has a host:port address, a status of 0 or 100 to 599, and a
// path without a query.
func FuzzAccessLogLine(f *testing.F) {
	for _, s := range []string{
		`{"upstream_addr":"127.0.0.1:8081, 127.0.0.1:8082","upstream_status":"502, 200","upstream_response_time":"0.001, 0.004","upstream_retry_after":"-, -","request_method":"GET","uri":"/p?q=1"}`,
		`{"upstream_addr":"a:1 : b:2","upstream_status":"1 : 999","upstream_response_time":"-1 : 1e308"}`,
		`{"upstream_addr":null}`, `{}`, `[]`, "", "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ats, err := parseAccessLine(line)
		if err != nil && ats != nil {
			t.Fatalf("attempts %+v with an error %v", ats, err)
		}
		for _, at := range ats {
			if at.Addr == "" || at.Status != 0 && (at.Status < 100 || at.Status > 599) || strings.Contains(at.Path, "?") || at.Latency < -1 {
				t.Fatalf("line %q: attempt %+v", line, at)
			}
		}
	})
}

// tailed collects the lines of one poll.
func tailed(t *testing.T, tl *tailer) []string {
	t.Helper()
	var got []string
	if err := tl.poll(func(b []byte) { got = append(got, string(b)) }); err != nil {
		t.Fatal(err)
	}
	return got
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestTailer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rotate func(t *testing.T, path string)
	}{
		{"renamed (logrotate, then nginx -s reopen)", func(t *testing.T, path string) {
			appendTo(t, path, "old-last\n") // written before the rename
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			appendTo(t, path+".1", "old-after-rename\n") // before nginx reopens
			appendTo(t, path, "new-1\n")
		}},
		{"truncated (copytruncate)", func(t *testing.T, path string) {
			appendTo(t, path, "old-last\n")
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			appendTo(t, path, "new-1\n")
		}},
		{"removed, then created again", func(t *testing.T, path string) {
			appendTo(t, path, "old-last\n")
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "access.log")
			appendTo(t, path, "before-1\nbefore-2\n")
			tl := newTailer(path)
			t.Cleanup(tl.close)
			if got := tailed(t, tl); len(got) != 0 {
				t.Fatalf("first poll: %q, want nothing (the file is followed from its end)", got)
			}
			appendTo(t, path, "line-1\nhalf")
			if got := tailed(t, tl); !reflect.DeepEqual(got, []string{"line-1"}) {
				t.Fatalf("lines %q, want line-1 (half a line waits)", got)
			}
			appendTo(t, path, "-done\n")
			if got := tailed(t, tl); !reflect.DeepEqual(got, []string{"half-done"}) {
				t.Fatalf("lines %q, want half-done", got)
			}
			tc.rotate(t, path)
			got := tailed(t, tl)
			got = append(got, tailed(t, tl)...)
			want := map[string][]string{
				"renamed (logrotate, then nginx -s reopen)": {"old-last", "old-after-rename", "new-1"},
				"truncated (copytruncate)":                  {"new-1"},
				"removed, then created again":               {"old-last"},
			}[tc.name]
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("after the rotation: %q, want %q", got, want)
			}
			appendTo(t, path, "new-2\n")
			if got := tailed(t, tl); !reflect.DeepEqual(got, []string{"new-2"}) {
				t.Fatalf("later: %q, want new-2", got)
			}
		})
	}
}

// A line longer than maxLogLine is skipped, the next one read.
func TestTailerLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	appendTo(t, path, "")
	tl := newTailer(path)
	t.Cleanup(tl.close)
	tailed(t, tl)
	appendTo(t, path, strings.Repeat("x", maxLogLine+10)+"\nshort\n")
	if got := tailed(t, tl); !reflect.DeepEqual(got, []string{"short"}) {
		t.Fatalf("lines of %d bytes: %d, want only short", len(got), len(got))
	}
}

// BenchmarkAccessLogLine: parsing one log line of two upstream attempts
// and recording them in their windows, vigil-node's work per request
// nginx logs (reported as lines per second of one core).
func BenchmarkAccessLogLine(b *testing.B) {
	line := []byte(`{"upstream_addr":"127.0.0.1:8081, 127.0.0.1:8082","upstream_status":"502, 200","upstream_response_time":"0.001, 0.004","upstream_retry_after":"-, -","request_method":"GET","uri":"/p"}`)
	p, err := newPassive(PassiveConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ats, err := parseAccessLine(line)
		if err != nil || len(ats) != 2 {
			b.Fatal(ats, err)
		}
		for _, at := range ats {
			p.record(at.attempt(at.Addr))
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// Upstream addresses map back to the published origins: by IP and port,
// and an origin published by hostname by the IPs it resolves to.
func TestUpstreamAddresses(t *testing.T) {
	snap := &publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{
			{Name: "a1", Address: "http://192.0.2.1:8080", State: "healthy"},
			{Name: "a2", Address: "https://origin.example.net", State: "healthy"},
		},
		Backup: &publication.Backup{Level: 2, Origins: []publication.Origin{{Name: "b1", Address: "[2001:db8::1]:81", State: "healthy"}}}}}}
	v, _ := edge.Build(snap, nil, "", nil)
	resolve := func(host string) []netip.Addr {
		if host == "origin.example.net" {
			return []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("::ffff:198.51.100.8")}
		}
		t.Errorf("resolved %q: only hostnames are", host)
		return nil
	}
	got := upstreamAddresses(v, resolve)
	want := map[string]string{
		"192.0.2.1:8080": "http://192.0.2.1:8080", "[2001:db8::1]:81": "[2001:db8::1]:81",
		"origin.example.net:443": "https://origin.example.net", "198.51.100.7:443": "https://origin.example.net", "198.51.100.8:443": "https://origin.example.net",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("upstreamAddresses = %v, want %v", got, want)
	}
}
