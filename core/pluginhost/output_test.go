package pluginhost

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestPluginOutputAtInfo: what a Go plugin prints on stdout, on stderr
// and through Go's log package reaches the host's log at INFO, under the
// source's name (it was lost, or DEBUG only).
func TestPluginOutputAtInfo(t *testing.T) {
	logs := &sdktest.LogBuffer{}
	src, _ := newSource(t, `voter = "v"`, func(s *Spec) {
		s.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs})
	})
	if _, err := src.Vote(context.Background(), sdk.Ballot{Targets: []sdk.Target{{Site: "output", Origin: "a", Address: "http://127.0.0.1:1"}}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"to stdout", "to stderr", "by the log package"} {
		waitFor(t, "the plugin's line "+want+" in the log", 10*time.Second, func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, want) && strings.Contains(l, "[INFO]") && strings.Contains(l, "source=test") {
					return true
				}
			}
			return false
		})
	}
}

// TestDetailCapped: a 1 MiB detail is cut to MaxDetailBytes, on a rune
// boundary, and counted.
func TestDetailCapped(t *testing.T) {
	src, _ := newSource(t, `voter = "v"`, nil)
	votes, err := src.Vote(context.Background(), sdk.Ballot{Targets: []sdk.Target{{Site: "bigdetail", Origin: "a", Address: "http://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(votes) != 1 {
		t.Fatalf("votes %d, want 1", len(votes))
	}
	d := votes[0].Detail
	if len(d) > MaxDetailBytes+100 || !utf8.ValidString(d) || !strings.Contains(d, "bytes cut") {
		t.Errorf("detail of %d bytes (valid UTF-8 %v), want at most %d and a mark: ...%q", len(d), utf8.ValidString(d), MaxDetailBytes, d[max(0, len(d)-60):])
	}
	if n := src.Stats().TruncatedDetails; n != 1 {
		t.Errorf("Stats().TruncatedDetails = %d, want 1", n)
	}
}

// TestLineLimiter runs the plugin-line logger on a clock of its own: at
// most MaxLogLinesPerSecond lines a second pass, the rest are counted,
// and the next line that passes says how many were dropped.
func TestLineLimiter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var total atomic.Uint64
	logs := &sdktest.LogBuffer{}
	l := &pluginLog{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: logs}),
		lim: &lineLimiter{total: &total, now: func() time.Time { return now }}}
	named := l.Named("vigil-source-x")
	for i := range 3 * MaxLogLinesPerSecond {
		named.Info("line", "i", i)
	}
	if got := total.Load(); got != 2*MaxLogLinesPerSecond {
		t.Fatalf("dropped %d, want %d", got, 2*MaxLogLinesPerSecond)
	}
	if n := strings.Count(logs.String(), "line: "); n != MaxLogLinesPerSecond {
		t.Errorf("%d lines logged in the first second, want %d", n, MaxLogLinesPerSecond)
	}
	now = now.Add(time.Second)
	named.Debug("plain stderr line") // no key/value pairs: a plain line, at INFO
	out := logs.String()
	if !strings.Contains(out, "dropped 400 log lines of the plugin") {
		t.Errorf("no line saying how many were dropped:\n%s", out[max(0, len(out)-400):])
	}
	if !strings.Contains(out, "[INFO]  vigil-source-x: plain stderr line: stream=stderr") {
		t.Errorf("the plain line is not at INFO:\n%s", out[max(0, len(out)-400):])
	}
	named.Debug("an hclog line", "timestamp", "t")
	if !strings.Contains(logs.String(), "[DEBUG] vigil-source-x: an hclog line") {
		t.Errorf("an hclog DEBUG line changed level:\n%s", logs.String()[max(0, len(logs.String())-400):])
	}
}

func TestLineWriter(t *testing.T) {
	var total atomic.Uint64
	logs := &sdktest.LogBuffer{}
	l := &pluginLog{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs}),
		lim: &lineLimiter{total: &total, now: time.Now}}
	w := &lineWriter{log: l, stream: "stdout"}
	for _, p := range []string{"one\ntw", "o\r\n", "\n", "three"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "[INFO]  one: stream=stdout") || !strings.Contains(out, "[INFO]  two: stream=stdout") || strings.Contains(out, "three") {
		t.Errorf("lines logged:\n%s", out)
	}
}

// TestOutputBoundsDocumented: PROTOCOL.md states the bounds this package
// applies.
func TestOutputBoundsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../sdk/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("at most %d lines a second", MaxLogLinesPerSecond), fmt.Sprintf("longer than %d bytes is cut", MaxDetailBytes)} {
		if !strings.Contains(strings.Join(strings.Fields(string(b)), " "), want) {
			t.Errorf("sdk/PROTOCOL.md does not say %q", want)
		}
	}
}
