package nodeagent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// named starts an origin that answers its name.
func named(t testing.TB, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

func site(level int, addr string) []publication.Site {
	return []publication.Site{{Name: "www", Hostname: "www.example.com", Level: level,
		Origins: []publication.Origin{{Name: "o" + string(rune('0'+level)), Address: addr, State: "healthy"}}}}
}

// running is an agent started by a test.
type running struct {
	a      *Agent
	events chan Event
	stop   func()
}

func (r *running) await(t testing.TB, kind EventKind, version uint64) Event {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case e := <-r.events:
			if e.Kind == kind && (version == 0 || e.Version == version) {
				return e
			}
		case <-timeout:
			t.Fatalf("no event %d (version %d) within 10s", kind, version)
		}
	}
}

func startAgent(t testing.TB, cfg Config) *running {
	t.Helper()
	r := &running{events: make(chan Event, 256)}
	cfg.ProxyListen = "127.0.0.1:0"
	cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	cfg.PollWait = 5 * time.Second
	cfg.Log = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
	cfg.OnEvent = func(e Event) { r.events <- e }
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(r.stop)
	r.await(t, EventListening, 0)
	return r
}

func get(t testing.TB, r *running) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+r.a.ProxyAddr().String()+"/", nil)
	req.Host = "www.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLevelSwitchFromPublication: a new level published by the control
// plane is served by the next request.
func TestLevelSwitchFromPublication(t *testing.T) {
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	l1, l2 := named(t, "level-1"), named(t, "level-2")
	v1 := cp.Publish(site(1, l1))
	r := startAgent(t, Config{ControlPlane: cp.URL(), StateDir: t.TempDir()})
	r.await(t, EventPublication, v1)
	if code, body := get(t, r); code != 200 || body != "level-1" {
		t.Fatalf("before the switch: %d %q", code, body)
	}
	v2 := cp.Publish(site(2, l2))
	r.await(t, EventPublication, v2)
	if code, body := get(t, r); code != 200 || body != "level-2" {
		t.Fatalf("after the switch: %d %q", code, body)
	}
}

// TestControlPlaneDown: with the control plane gone, the last snapshot is
// served, also by a restarted agent reading its state directory.
func TestControlPlaneDown(t *testing.T) {
	cp := fakecp.New()
	l2 := named(t, "level-2")
	dir := t.TempDir()
	cp.Publish(site(1, named(t, "level-1")))
	v := cp.Publish(site(2, l2))
	first := startAgent(t, Config{ControlPlane: cp.URL(), StateDir: dir})
	first.await(t, EventPublication, v)
	cp.Close()
	if code, body := get(t, first); code != 200 || body != "level-2" {
		t.Fatalf("control plane down: %d %q", code, body)
	}
	first.stop()

	second := startAgent(t, Config{ControlPlane: cp.URL(), StateDir: dir})
	if got := second.a.Snapshot(); got == nil || got.Version != v {
		t.Fatalf("restarted agent's snapshot %+v, want version %d", got, v)
	}
	if code, body := get(t, second); code != 200 || body != "level-2" {
		t.Fatalf("restarted with the control plane down: %d %q", code, body)
	}
}

func TestSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	if snap, err := LoadSnapshot(dir); snap != nil || err != nil {
		t.Fatalf("empty dir: %v %v", snap, err)
	}
	want := &publication.Snapshot{Version: 7, Sites: site(2, "http://192.0.2.7")}
	if err := SaveSnapshot(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSnapshot(dir)
	if err != nil || got.Version != 7 || got.Sites[0].Origins[0].Address != "http://192.0.2.7" {
		t.Fatalf("loaded %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	tests := []struct{ name, content, want string }{
		{"garbage", "not json", "not a publication"},
		{"version 0", `{"version":0,"sites":[]}`, "version 0"},
		{"trailing", `{"version":1,"sites":[]} {}`, "after the JSON"},
		{"no hostname", `{"version":1,"sites":[{"site":"www"}]}`, "no usable hostname"},
		{"duplicate", `{"version":1,"sites":[{"site":"a","hostname":"x"},{"site":"b","hostname":"x"}]}`, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, SnapshotFile), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadSnapshot(d)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "delete it") {
				t.Errorf("error %v, want %q and what to do", err, tt.want)
			}
		})
	}
}

// FuzzDecodeSnapshot: whatever is accepted is a usable snapshot that
// survives a save and a load.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(`{"version":1,"sites":[{"site":"www","hostname":"www.example.com","level":1,"origins":[{"name":"a","address":"http://x","state":"healthy"}]}]}`)
	f.Add(`{"version":0}`)
	f.Add(`{"version":3,"sites":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		snap, err := DecodeSnapshot(strings.NewReader(s))
		if err != nil {
			return
		}
		if snap.Version == 0 {
			t.Fatal("accepted version 0")
		}
		for _, st := range snap.Sites {
			if got := snap.Site(st.Hostname); got == nil {
				t.Fatalf("site %q not found by its hostname", st.Hostname)
			}
		}
		dir := t.TempDir()
		if err := SaveSnapshot(dir, snap); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadSnapshot(dir); err != nil {
			t.Fatalf("saved snapshot does not load: %v", err)
		}
	})
}
