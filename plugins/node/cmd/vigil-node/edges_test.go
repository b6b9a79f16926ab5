package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/edge"
)

// captureHAProxy makes run stop at the HAProxy driver and returns the
// options the flags gave it.
func captureHAProxy(t *testing.T) *edge.HAProxyOptions {
	t.Helper()
	got := &edge.HAProxyOptions{}
	orig := newHAProxy
	newHAProxy = func(o edge.HAProxyOptions) (*edge.HAProxy, error) {
		*got = o
		return nil, errStop
	}
	t.Cleanup(func() { newHAProxy = orig })
	return got
}

var errStop = errors.New("stopped at the HAProxy driver")

func TestHAProxyRemovalFlagsReachTheDriver(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		args                      []string
		removeAfter, drainTimeout time.Duration
	}{
		{"defaults", nil, edge.DefaultHAProxyRemoveAfter, 0},
		{"both set", []string{"-haproxy-remove-after", "5m", "-haproxy-drain-timeout", "20m"}, 5 * time.Minute, 20 * time.Minute},
		{"drain timeout shorter", []string{"-haproxy-remove-after", "2m", "-haproxy-drain-timeout", "30s"}, 2 * time.Minute, 30 * time.Second},
		// The driver reads 0 as its default: the flag's 0 (at once) is
		// handed on as a negative duration.
		{"remove at once", []string{"-haproxy-remove-after", "0"}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := captureHAProxy(t)
			args := append([]string{"-haproxy-socket", "/run/haproxy/admin.sock", "-log-level", "error"}, tc.args...)
			if err := run(args); !errors.Is(err, errStop) {
				t.Fatalf("run: %v, want the driver reached", err)
			}
			if got.Socket != "/run/haproxy/admin.sock" {
				t.Errorf("Socket = %q", got.Socket)
			}
			if got.RemoveAfter != tc.removeAfter || got.DrainTimeout != tc.drainTimeout {
				t.Errorf("RemoveAfter, DrainTimeout = %v, %v; want %v, %v", got.RemoveAfter, got.DrainTimeout, tc.removeAfter, tc.drainTimeout)
			}
			if got.Log == nil {
				t.Error("the driver got no logger: its removals and refused deletions would not be logged")
			}
		})
	}
}

// The servers vigil-node adds are checked and observed by default, so that
// HAProxy can route around a failing level; -haproxy-watch reaches the
// driver, 0 (never) as a negative duration.
func TestHAProxyWindowFlagsReachTheDriver(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		serverArgs string
		watch      time.Duration
	}{
		{"defaults", nil, edge.DefaultHAProxyServerArgs, edge.DefaultHAProxyWatch},
		{"no server arguments", []string{"-haproxy-server-args", ""}, "", edge.DefaultHAProxyWatch},
		{"own arguments, slower watch", []string{"-haproxy-server-args", "check inter 5s", "-haproxy-watch", "1s"}, "check inter 5s", time.Second},
		{"no watch", []string{"-haproxy-watch", "0"}, edge.DefaultHAProxyServerArgs, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := captureHAProxy(t)
			args := append([]string{"-haproxy-socket", "/run/haproxy/admin.sock", "-log-level", "error"}, tc.args...)
			if err := run(args); !errors.Is(err, errStop) {
				t.Fatalf("run: %v, want the driver reached", err)
			}
			if got.ServerArgs != tc.serverArgs || got.Watch != tc.watch {
				t.Errorf("ServerArgs, Watch = %q, %v; want %q, %v", got.ServerArgs, got.Watch, tc.serverArgs, tc.watch)
			}
		})
	}
}

func TestHAProxyRemovalFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the error
	}{
		{"negative drain timeout", []string{"-haproxy-socket", "/run/haproxy/admin.sock", "-haproxy-drain-timeout", "-5s"},
			[]string{"-haproxy-drain-timeout -5s", "give 0", "positive duration"}},
		{"negative remove after", []string{"-haproxy-socket", "/run/haproxy/admin.sock", "-haproxy-remove-after", "-1m"},
			[]string{"-haproxy-remove-after -1m0s", "give 0", "positive duration"}},
		{"drain timeout without socket", []string{"-haproxy-drain-timeout", "10m"},
			[]string{"-haproxy-drain-timeout", "need -haproxy-socket"}},
		{"remove after without socket", []string{"-haproxy-remove-after", "0"},
			[]string{"-haproxy-remove-after", "need -haproxy-socket"}},
		{"negative watch", []string{"-haproxy-socket", "/run/haproxy/admin.sock", "-haproxy-watch", "-1s"},
			[]string{"-haproxy-watch -1s", "e.g. 100ms", "or 0"}},
		{"watch without socket", []string{"-haproxy-watch", "1s"},
			[]string{"-haproxy-watch", "needs -haproxy-socket"}},
		{"server arguments without socket", []string{"-haproxy-server-args", "check inter 2s"},
			[]string{"-haproxy-server-args", "need -haproxy-socket", "template"}},
		{"TLS arguments without socket", []string{"-haproxy-tls-args", "ssl verify none"},
			[]string{"-haproxy-tls-args", "need -haproxy-socket"}},
		{"unknown log level", []string{"-haproxy-socket", "/run/haproxy/admin.sock", "-log-level", "bogus"},
			[]string{`-log-level "bogus"`, "give one of", "debug"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := captureHAProxy(t)
			err := run(tc.args)
			if err == nil || errors.Is(err, errStop) {
				t.Fatalf("run: %v, want the flags refused", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if got.Socket != "" {
				t.Error("the driver was built despite the error")
			}
		})
	}
}

// fakeRuntime is a Runtime API answering one command per connection, as
// HAProxy's stats socket does: backend web has server a (haproxy.cfg's)
// and old (added by vigil-node, id 1000000000, in maintenance). del server
// web/old is refused refusals times, then done.
type fakeRuntime struct {
	mu       sync.Mutex
	refusals int
	deleted  bool
	dels     int
}

const refusal = "Server still has connections attached to it, cannot remove it."

func (f *fakeRuntime) answer(cmd string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case cmd == "show info":
		return "Name: HAProxy\nVersion: 2.6.12\n"
	case cmd == "show servers state":
		s := "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port\n" +
			"2 web 1 a 127.0.0.1 2 0 1 1 10 1 0 0 0 0 0 0 - 8080\n"
		if !f.deleted {
			s += "2 web 1000000000 old 127.0.0.2 2 1 1 1 10 1 0 0 0 0 0 1 - 8080\n"
		}
		return s
	case cmd == "del server web/old":
		f.dels++
		if f.deleted {
			return "No such server."
		}
		if f.refusals > 0 {
			f.refusals--
			return refusal
		}
		f.deleted = true
		return "Server deleted."
	}
	return ""
}

func (f *fakeRuntime) serve(t *testing.T) string {
	dir, err := os.MkdirTemp("", "vn") // short: a unix socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "admin.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Write([]byte(f.answer(strings.TrimSpace(line))))
			c.Close()
		}
	}()
	return path
}

// syncBuffer is a bytes.Buffer the logger and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHAProxyRemovalLogged runs the driver edgeDrivers builds, with
// vigil-node's logger at its default level, against a Runtime API that
// refuses del server twice: one WARN names the server and HAProxy's
// answer, the repeated refusal is not logged again at that level, the
// deletion is an INFO, and nothing is an ERROR.
func TestHAProxyRemovalLogged(t *testing.T) {
	rt := &fakeRuntime{refusals: 2}
	var out syncBuffer
	drivers, err := edgeDrivers(edgeFlags{haSocket: rt.serve(t), haTLSArgs: edge.DefaultHAProxyTLSArgs,
		haRemoveAfter: 0, haDrainTimeout: 0, log: newLogger("info", false, &out)})
	if err != nil {
		t.Fatal(err)
	}
	if len(drivers) != 1 {
		t.Fatalf("%d drivers, want the HAProxy one", len(drivers))
	}
	h := drivers[0].(*edge.HAProxy)
	v := &edge.View{Version: 1, Sites: []edge.Site{{Name: "web", Backend: "web", Hostname: "web.example", Level: 1,
		Origins: []edge.Origin{{Name: "a", Server: "a", Level: 1, Scheme: "http", Host: "127.0.0.1", Port: "8080", HostPort: "127.0.0.1:8080"}}}}}
	for i := range 3 {
		if _, err := h.Apply(context.Background(), v); err != nil {
			t.Fatalf("apply %d: %v (a refused del server must not fail the apply)", i+1, err)
		}
	}
	logs := out.String()
	t.Logf("vigil-node's log:\n%s", logs)
	if rt.dels != 3 || !rt.deleted {
		t.Fatalf("%d del server sent, deleted %v; want 3 and true", rt.dels, rt.deleted)
	}
	var warns, deleted []string
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		switch {
		case strings.Contains(l, "[ERROR]"):
			t.Errorf("an ERROR for a refusal that is retried: %s", l)
		case strings.Contains(l, "[WARN]"):
			warns = append(warns, l)
		case strings.Contains(l, "[INFO]") && strings.Contains(l, "server deleted"):
			deleted = append(deleted, l)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d WARN lines, want 1 (for the first refusal): %q", len(warns), warns)
	}
	for _, w := range []string{"vigil-node.edge:", "edge=haproxy", "server=web/old", refusal} {
		if !strings.Contains(warns[0], w) {
			t.Errorf("the refusal's WARN does not say %q: %s", w, warns[0])
		}
	}
	if len(deleted) != 1 || !strings.Contains(deleted[0], "server=web/old") {
		t.Errorf("want one INFO server deleted for web/old, got %q", deleted)
	}
}
