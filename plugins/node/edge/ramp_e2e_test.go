package edge_test

import (
	"bufio"
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// recorder is a Runtime API socket in front of HAProxy's that records the
// commands sent through it.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func record(t *testing.T, path, target string) *recorder {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	r := &recorder{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				r.mu.Lock()
				r.lines = append(r.lines, strings.TrimSpace(line))
				r.mu.Unlock()
				up, err := net.Dial("unix", target)
				if err != nil {
					return
				}
				defer up.Close()
				_, _ = io.WriteString(up, line)
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return r
}

// take returns the recorded "set server" commands and forgets them all.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.HasPrefix(l, "set server ") {
			out = append(out, l)
		}
	}
	r.lines = nil
	return out
}

// weights returns each server's "weight admin" from show servers state.
func weights(t *testing.T, h *edge.HAProxy) map[string]string {
	t.Helper()
	out, err := h.Command(context.Background(), "show servers state www")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	col := map[string]int{}
	for i, c := range strings.Fields(strings.TrimPrefix(lines[1], "# ")) {
		col[c] = i
	}
	m := map[string]string{}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) > col["srv_iweight"] {
			m[f[col["srv_name"]]] = f[col["srv_uweight"]] + " " + f[col["srv_admin_state"]]
		}
	}
	return m
}

// TestHAProxyRuntimeRamp: during a failback ramp the runtime driver serves
// both levels, the current level's servers with the ramp's weight and the
// level being left's ready (not in maintenance) with the rest; HAProxy's
// weighted round-robin then splits the requests as the ramp says. When the
// ramp ends, the current level's weights go back to their initial value
// and the level left goes to maintenance, its backup servers ready.
func TestHAProxyRuntimeRamp(t *testing.T) {
	bin := peer(t, "haproxy")
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	startHAProxy(t, bin, dir, haproxyConfig(sock, listen), sock)
	front := filepath.Join(dir, "recorded.sock")
	rec := record(t, front, sock)
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: front})
	if err != nil {
		t.Fatal(err)
	}
	l := newLevels(t)
	topo := edge.Topology{}
	for level, list := range l.byLevel {
		for _, o := range list {
			topo["www"] = append(topo["www"], edge.LevelOrigin{Name: o.Name, Address: o.Address, State: o.State, Level: level})
		}
	}
	apply := func(site publication.Site) {
		t.Helper()
		v, _ := edge.Build(&publication.Snapshot{Version: 1, Format: publication.FormatRamp, Sites: []publication.Site{site}}, topo, "", nil)
		if _, err := h.Apply(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	ramp := func(weight int) publication.Site {
		s := l.site(1)[0]
		s.Ramp = &publication.Ramp{Weight: weight, From: 2, FromOrigins: l.byLevel[2]}
		return s
	}
	split := func(n int) float64 {
		t.Helper()
		client := &http.Client{}
		count := map[string]int{}
		for range n {
			body, err := get(client, "http://"+listen+"/")
			if err != nil {
				t.Fatal(err)
			}
			count[body]++
		}
		share := float64(count["a1"]+count["a2"]) / float64(n)
		t.Logf("%d requests through haproxy: %v: level 1's share %.3f", n, count, share)
		return share
	}

	apply(l.site(2)[0]) // failed over to level 2: a1, a2 added in maintenance
	rec.take()
	if w := weights(t, h); w["b1"] != "1 0" || w["a1"] != "1 1" || w["a2"] != "1 1" {
		t.Fatalf("level 2: servers %v", w)
	}

	apply(ramp(25))
	got := rec.take()
	want := []string{
		"set server www/a1 weight 25", "set server www/a1 state ready",
		"set server www/a2 weight 25", "set server www/a2 state ready",
		"set server www/b1 weight 150",
		// Level 1 was level 2's backup: served now, its backup servers
		// go out.
		"set server www/a1:backup state maint", "set server www/a2:backup state maint",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ramp 25: commands\n%q\nwant\n%q", got, want)
	}
	if w := weights(t, h); w["a1"] != "25 0" || w["a2"] != "25 0" || w["b1"] != "150 0" {
		t.Errorf("ramp 25: servers %v", w)
	}
	if share := split(400); math.Abs(share-0.25) > 0.03 {
		t.Errorf("ramp 25: level 1's share %.3f, want 0.25 ± 0.03", share)
	}

	apply(ramp(60)) // weights only
	if got, want := rec.take(), []string{"set server www/a1 weight 60", "set server www/a2 weight 60", "set server www/b1 weight 80"}; !slices.Equal(got, want) {
		t.Errorf("ramp 60: commands %q, want %q", got, want)
	}
	if share := split(400); math.Abs(share-0.60) > 0.03 {
		t.Errorf("ramp 60: level 1's share %.3f, want 0.60 ± 0.03", share)
	}

	apply(l.site(1)[0]) // the ramp is over
	if got, want := rec.take(), []string{"set server www/a1 weight 1", "set server www/a2 weight 1",
		"set server www/b1:backup state ready", "set server www/b1 state maint"}; !slices.Equal(got, want) {
		t.Errorf("after the ramp: commands %q, want %q", got, want)
	}
	if share := split(100); share != 1 {
		t.Errorf("after the ramp: level 1's share %.3f, want 1", share)
	}
	apply(l.site(1)[0])
	if got := rec.take(); len(got) != 0 {
		t.Errorf("applied again: commands %q, want none", got)
	}
}
