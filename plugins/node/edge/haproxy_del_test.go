package edge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// siteSpec is one site of a removal test: its current level and every
// level's origins (the topology).
type siteSpec struct {
	level  int
	levels map[int][]string
}

// origins are loopback origins by name.
type origins map[string]string

func newOrigins(t *testing.T, names ...string) origins {
	o := origins{}
	for _, n := range names {
		o[n] = origin(t, n).URL
	}
	return o
}

// hostPort is the origin's address as a server line writes it.
func (o origins) hostPort(name string) string { return strings.TrimPrefix(o[name], "http://") }

// view is the View of sites (publication version 1, with the topology).
func (o origins) view(t *testing.T, sites map[string]siteSpec) *edge.View {
	t.Helper()
	snap := &publication.Snapshot{Version: 1}
	topo := edge.Topology{}
	for _, name := range slices.Sorted(maps.Keys(sites)) {
		s := sites[name]
		ps := publication.Site{Name: name, Hostname: name + ".example.com", Level: s.level}
		for _, level := range slices.Sorted(maps.Keys(s.levels)) {
			for _, n := range s.levels[level] {
				if level == s.level {
					ps.Origins = append(ps.Origins, publication.Origin{Name: n, Address: o[n], State: "healthy"})
				}
				topo[name] = append(topo[name], edge.LevelOrigin{Name: n, Address: o[n], State: "healthy", Level: level})
			}
		}
		snap.Sites = append(snap.Sites, ps)
	}
	v, skipped := edge.Build(snap, topo, "", nil)
	if len(skipped) > 0 {
		t.Fatalf("skipped origins %v", skipped)
	}
	return v
}

// listedServer is one server of show servers state.
type listedServer struct {
	state string // ready, drain, maint
	id    int
}

// listed returns the servers show servers state lists in backend.
func listed(t *testing.T, h *edge.HAProxy, backend string) map[string]listedServer {
	t.Helper()
	out, err := h.Command(context.Background(), "show servers state "+backend)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	m := map[string]listedServer{}
	if len(lines) < 2 {
		return m // a backend without any server
	}
	col := map[string]int{}
	for i, c := range strings.Fields(strings.TrimPrefix(lines[1], "# ")) {
		col[c] = i
	}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) <= col["srv_admin_state"] {
			continue
		}
		var admin, id int
		fmt.Sscan(f[col["srv_admin_state"]], &admin)
		fmt.Sscan(f[col["srv_id"]], &id)
		st := "ready"
		switch {
		case admin&0x01 != 0:
			st = "maint"
		case admin&0x08 != 0:
			st = "drain"
		}
		m[f[col["srv_name"]]] = listedServer{state: st, id: id}
	}
	return m
}

// sent returns the recorded commands that start with prefix.
func (r *recorder) sent(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// testClock is the driver's clock in the removal tests.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// removalConfig is haproxyConfig with servers declared in backend www and
// a second backend, old (servers: name of an origin, or "static").
func removalConfig(sock, listen string, o origins, www, old []string) string {
	cfg := haproxyConfig(sock, listen)
	line := func(name string) string {
		addr := o.hostPort(name)
		if addr == "" {
			addr = "127.0.0.1:9" // never served: kept in maintenance
		}
		return "    server " + name + " " + addr + "\n"
	}
	for _, n := range www {
		cfg += line(n)
	}
	cfg += "backend old\n    balance roundrobin\n"
	for _, n := range old {
		cfg += line(n)
	}
	return cfg
}

func pendingNames(rs []edge.Removal) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Backend+"/"+r.Server)
	}
	return out
}

// TestHAProxyRemoval: the servers vigil-node added whose origin left every
// level of its site (or whose site left the publication) are deleted from
// HAProxy once RemoveAfter has passed; servers from haproxy.cfg, and
// servers vigil-node did not add, never are.
func TestHAProxyRemoval(t *testing.T) {
	bin := peer(t, "haproxy")
	type step struct {
		what    string
		cli     []string // sent to HAProxy before the apply
		restart bool     // a new driver: vigil-node restarted
		advance time.Duration
		sites   map[string]siteSpec
		// want is, by backend, each server's state; "" is not listed.
		want    map[string]map[string]string
		pending []string
	}
	www := func(levels map[int][]string) map[string]siteSpec {
		return map[string]siteSpec{"www": {level: 1, levels: levels}}
	}
	cases := []struct {
		name           string
		serverArgs     string
		cfgWWW, cfgOld []string
		steps          []step
	}{
		{
			name: "an origin dropped from the current level",
			steps: []step{
				{what: "published", sites: www(map[int][]string{1: {"a1", "a2"}, 2: {"b1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "ready", "b1": "maint"}}, pending: []string{}},
				{what: "a2 dropped", sites: www(map[int][]string{1: {"a1"}, 2: {"b1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "maint", "b1": "maint"}}, pending: []string{"www/a2", "www/a2:backup"}},
				{what: "within RemoveAfter", advance: 59 * time.Second, sites: www(map[int][]string{1: {"a1"}, 2: {"b1"}}),
					want: map[string]map[string]string{"www": {"a2": "maint"}}, pending: []string{"www/a2", "www/a2:backup"}},
				{what: "past RemoveAfter", advance: 2 * time.Second, sites: www(map[int][]string{1: {"a1"}, 2: {"b1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "", "b1": "maint"}}, pending: []string{}},
				{what: "a2 back", sites: www(map[int][]string{1: {"a1", "a2"}, 2: {"b1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "ready", "b1": "maint"}}, pending: []string{}},
			},
		},
		{
			name:       "with health checks",
			serverArgs: "check inter 100ms",
			steps: []step{
				{what: "published", sites: www(map[int][]string{1: {"a1", "a2"}, 2: {"b1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "ready", "b1": "maint"}}, pending: []string{}},
				{what: "a2 and b1 dropped", sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "maint", "b1": "maint"}}, pending: []string{"www/a2", "www/a2:backup", "www/b1", "www/b1:backup"}},
				{what: "past RemoveAfter", advance: time.Minute, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "", "b1": ""}}, pending: []string{}},
			},
		},
		{
			name: "an origin back within RemoveAfter is kept",
			steps: []step{
				{what: "published", sites: www(map[int][]string{1: {"a1", "a2"}}),
					want: map[string]map[string]string{"www": {"a2": "ready"}}, pending: []string{}},
				{what: "a2 dropped", sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a2": "maint"}}, pending: []string{"www/a2", "www/a2:backup"}},
				{what: "a2 back", advance: 30 * time.Second, sites: www(map[int][]string{1: {"a1", "a2"}}),
					want: map[string]map[string]string{"www": {"a2": "ready"}}, pending: []string{}},
				{what: "the first drop's RemoveAfter passed", advance: 31 * time.Second, sites: www(map[int][]string{1: {"a1", "a2"}}),
					want: map[string]map[string]string{"www": {"a2": "ready"}}, pending: []string{}},
			},
		},
		{
			name: "an origin dropped from another level",
			steps: []step{
				{what: "published", sites: www(map[int][]string{1: {"a1"}, 2: {"b1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "b1": "maint"}}, pending: []string{}},
				{what: "level 2 gone", sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"b1": "maint"}}, pending: []string{"www/b1", "www/b1:backup"}},
				{what: "past RemoveAfter", advance: time.Minute, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "b1": ""}}, pending: []string{}},
			},
		},
		{
			name:   "a configuration server is never deleted",
			cfgWWW: []string{"a2", "static"},
			steps: []step{
				{what: "published", sites: www(map[int][]string{1: {"a1", "a2"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "ready", "static": "maint"}}, pending: []string{}},
				{what: "a2 dropped", sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "maint", "static": "maint"}}, pending: []string{"www/a2:backup"}},
				{what: "long after", advance: time.Hour, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "a2": "maint", "static": "maint"}}, pending: []string{}},
			},
		},
		{
			name: "a server added by hand is never deleted",
			steps: []step{
				{what: "published", cli: []string{"add server www/manual 127.0.0.1:9"}, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "manual": "maint"}}, pending: []string{}},
				{what: "long after", advance: time.Hour, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready", "manual": "maint"}}, pending: []string{}},
			},
		},
		{
			name:   "a site out of the publication",
			cfgOld: []string{"keep"},
			steps: []step{
				{what: "published", sites: map[string]siteSpec{"www": {level: 1, levels: map[int][]string{1: {"a1"}}},
					"old": {level: 1, levels: map[int][]string{1: {"keep", "o1"}, 2: {"o2"}}}},
					want: map[string]map[string]string{"old": {"keep": "ready", "o1": "ready", "o2": "maint"}}, pending: []string{}},
				{what: "old removed", sites: www(map[int][]string{1: {"a1"}}),
					want:    map[string]map[string]string{"www": {"a1": "ready"}, "old": {"keep": "maint", "o1": "maint", "o2": "maint"}},
					pending: []string{"old/keep:backup", "old/o1", "old/o1:backup", "old/o2", "old/o2:backup"}},
				{what: "past RemoveAfter", advance: time.Minute, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready"}, "old": {"keep": "maint", "o1": "", "o2": ""}}, pending: []string{}},
				{what: "its configuration server is left to the operator", cli: []string{"set server old/keep state ready"},
					advance: time.Minute, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"old": {"keep": "ready"}}, pending: []string{}},
			},
		},
		{
			name: "a backend no View of this vigil-node had is left alone",
			steps: []step{
				{what: "published", sites: map[string]siteSpec{"www": {level: 1, levels: map[int][]string{1: {"a1"}}},
					"old": {level: 1, levels: map[int][]string{1: {"o1"}}}},
					want: map[string]map[string]string{"old": {"o1": "ready"}}, pending: []string{}},
				{what: "restarted without old", restart: true, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"www": {"a1": "ready"}, "old": {"o1": "ready"}}, pending: []string{}},
				{what: "long after", advance: time.Hour, sites: www(map[int][]string{1: {"a1"}}),
					want: map[string]map[string]string{"old": {"o1": "ready"}}, pending: []string{}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
			o := newOrigins(t, "a1", "a2", "b1", "keep", "o1", "o2")
			startHAProxy(t, bin, dir, removalConfig(sock, listen, o, tc.cfgWWW, tc.cfgOld), sock)
			front := filepath.Join(dir, "recorded.sock")
			rec := record(t, front, sock)
			direct, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
			if err != nil {
				t.Fatal(err)
			}
			clock := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			driver := func() *edge.HAProxy {
				h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: front, ServerArgs: tc.serverArgs}) // RemoveAfter: the default minute
				if err != nil {
					t.Fatal(err)
				}
				edge.SetClock(h, clock.now)
				return h
			}
			h := driver()
			for i, st := range tc.steps {
				for _, c := range st.cli {
					if out, err := direct.Command(context.Background(), c); err != nil {
						t.Fatalf("step %d (%s): %s: %v", i, st.what, c, err)
					} else {
						t.Logf("%s: %s", c, out)
					}
				}
				if st.restart {
					h = driver()
				}
				clock.add(st.advance)
				if _, err := h.Apply(context.Background(), o.view(t, st.sites)); err != nil {
					t.Fatalf("step %d (%s): apply: %v", i, st.what, err)
				}
				for be, want := range st.want {
					got := listed(t, direct, be)
					for name, state := range want {
						if got[name].state != state {
							t.Errorf("step %d (%s): %s/%s is %q, want %q (servers %v)", i, st.what, be, name, got[name].state, state, got)
						}
					}
				}
				if got := pendingNames(h.Removals()); !slices.Equal(got, st.pending) {
					t.Errorf("step %d (%s): removals pending %v, want %v", i, st.what, got, st.pending)
				}
			}
			// Only what the driver added was ever deleted: never a
			// server of haproxy.cfg nor one added by hand.
			for _, c := range rec.sent("del server ") {
				name := strings.TrimPrefix(c, "del server ")
				if _, srv, _ := strings.Cut(name, "/"); slices.Contains(append(append([]string{"manual"}, tc.cfgWWW...), tc.cfgOld...), srv) {
					t.Errorf("sent %q: not a server vigil-node added", c)
				}
			}
			for _, c := range rec.sent("add server ") {
				if !strings.Contains(c, " id 100000000") {
					t.Errorf("sent %q without the id that marks vigil-node's servers", c)
				}
			}
			if t.Failed() {
				t.Logf("commands sent: %q", rec.sent(""))
			}
		})
	}
}

// heldOrigin is an origin whose requests to /hold wait until release;
// arrived gets a value when one comes, cut when HAProxy drops one before
// release.
type heldOrigin struct {
	url          string
	arrived, cut chan struct{}
	release      func()
}

func newHeldOrigin(t *testing.T, name string) *heldOrigin {
	gate := make(chan struct{})
	var once sync.Once
	o := &heldOrigin{arrived: make(chan struct{}, 16), cut: make(chan struct{}, 16), release: func() { once.Do(func() { close(gate) }) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			o.arrived <- struct{}{}
			select {
			case <-gate:
			case <-r.Context().Done():
				o.cut <- struct{}{}
				return
			}
		}
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(o.release) // before Close: a held handler must not block it
	o.url = srv.URL
	return o
}

// TestHAProxyRemovalDrain: a server whose origin left is not deleted while
// a request to it is in flight: HAProxy refuses del server, the apply does
// not fail, the server stays (in maintenance, no new request reaches it)
// and the deletion is retried at every apply until it succeeds, once the
// request ended. With DrainTimeout, the sessions are cut past it instead.
func TestHAProxyRemovalDrain(t *testing.T) {
	bin := peer(t, "haproxy")
	cases := []struct {
		name         string
		drainTimeout time.Duration
		advance      time.Duration // after the refused deletions
		cut          bool
	}{
		{name: "request ends then deleted", advance: 24 * time.Hour},
		{name: "cut past DrainTimeout", drainTimeout: 10 * time.Second, advance: 11 * time.Second, cut: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
			startHAProxy(t, bin, dir, haproxyConfig(sock, listen), sock)
			front := filepath.Join(dir, "recorded.sock")
			rec := record(t, front, sock)
			a2 := newHeldOrigin(t, "a2")
			o := origins{"a1": origin(t, "a1").URL, "a2": a2.url}
			clock := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: front, RemoveAfter: -1, DrainTimeout: tc.drainTimeout})
			if err != nil {
				t.Fatal(err)
			}
			edge.SetClock(h, clock.now)
			apply := func(levels map[int][]string) {
				t.Helper()
				if _, err := h.Apply(context.Background(), o.view(t, map[string]siteSpec{"www": {level: 1, levels: levels}})); err != nil {
					t.Fatalf("apply: %v", err)
				}
			}
			apply(map[int][]string{1: {"a1", "a2"}})
			url := "http://" + listen + "/"
			client := &http.Client{Timeout: 30 * time.Second}

			// One request held by a2 (round-robin: a1 answers the others).
			type answer struct {
				body string
				err  error
			}
			var held chan answer
			for held == nil {
				done := make(chan answer, 1)
				go func() {
					body, err := get(client, url+"hold")
					done <- answer{body, err}
				}()
				select {
				case <-a2.arrived:
					held = done
				case a := <-done:
					if a.err != nil || a.body != "a1" {
						t.Fatalf("a request not held: %q, %v", a.body, a.err)
					}
				case <-time.After(time.Minute):
					t.Fatal("no request reached a2")
				}
			}

			apply(map[int][]string{1: {"a1"}}) // a2 dropped: maintenance, deletion refused
			apply(map[int][]string{1: {"a1"}}) // and refused again
			if got := listed(t, h, "www")["a2"].state; got != "maint" {
				t.Fatalf("a2 is %q during its request, want maint", got)
			}
			rs := h.Removals()
			if len(rs) != 1 || rs[0].Server != "a2" || rs[0].Refused != 2 || !strings.Contains(rs[0].Err, "still has connections") {
				t.Fatalf("removals %+v, want www/a2 refused twice for its connection", rs)
			}
			for range 4 { // the new requests go to a1 only
				if body, err := get(client, url); err != nil || body != "a1" {
					t.Fatalf("during the drain: %q, %v", body, err)
				}
			}

			clock.add(tc.advance)
			if tc.cut {
				apply(map[int][]string{1: {"a1"}})
				select {
				case <-a2.cut: // a2 lost its request: HAProxy cut it
				case <-time.After(time.Minute):
					t.Fatal("the held request was not cut")
				}
				// With retries and option redispatch, HAProxy may send the
				// GET again to a1; the client sees that or an error.
				a := <-held
				t.Logf("the client of the request cut: %q, %v", a.body, a.err)
				if a.err == nil && a.body == "a2" {
					t.Fatal("a2 answered the request cut")
				}
				if got := rec.sent("shutdown sessions server "); !slices.Equal(got, []string{"shutdown sessions server www/a2"}) {
					t.Errorf("shutdown commands %q", got)
				}
			} else {
				a2.release()
				if a := <-held; a.err != nil || a.body != "a2" {
					t.Fatalf("the request in flight during the removal: %q, %v", a.body, a.err)
				}
			}
			// HAProxy releases the session just after the answer: the
			// deletion is retried at each apply until it goes through.
			waitFor(t, func() error {
				apply(map[int][]string{1: {"a1"}})
				if s, ok := listed(t, h, "www")["a2"]; ok {
					return fmt.Errorf("a2 still listed (%s), removals %+v", s.state, h.Removals())
				}
				return nil
			})
			if rs := h.Removals(); len(rs) != 0 {
				t.Errorf("removals %+v after the deletion", rs)
			}
			if !tc.cut {
				if got := rec.sent("shutdown sessions"); len(got) != 0 {
					t.Errorf("sessions were cut: %q", got)
				}
			}
			if dels := rec.sent("del server www/a2"); len(dels) < 3 {
				t.Errorf("del server sent %d times, want the refused ones and the last", len(dels))
			}
		})
	}
}

// TestHAProxyRemovalUnderLoad: through the agent, a publication drops an
// origin (and the next one brings it back) under about 300 GETs a second;
// every GET is answered while the server goes to maintenance and is
// deleted from HAProxy.
func TestHAProxyRemovalUnderLoad(t *testing.T) {
	bin := peer(t, "haproxy")
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	startHAProxy(t, bin, dir, haproxyConfig(sock, listen), sock)
	front := filepath.Join(dir, "recorded.sock")
	rec := record(t, front, sock)
	// a2 takes 20ms an answer: under the load, requests are in flight
	// there when it leaves, and HAProxy refuses the first deletions.
	l := &levels{byLevel: map[int][]publication.Origin{}}
	for _, o := range []struct {
		name  string
		level int
		delay time.Duration
	}{{"a1", 1, 0}, {"a2", 1, 20 * time.Millisecond}, {"b1", 2, 0}} {
		srv := slowOrigin(t, o.name, o.delay)
		l.byLevel[o.level] = append(l.byLevel[o.level], publication.Origin{Name: o.name, Address: srv.URL, State: "healthy"})
	}
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	full, fullTopo := l.site(1), l.topology()
	dropped := []publication.Site{{Name: "www", Hostname: hostname, Level: 1, Origins: l.byLevel[1][:1]}}
	droppedTopo := l.topology()
	delete(droppedTopo[0]["origins"].(map[string]any), "a2")
	if err := cp.SetSites(fullTopo); err != nil {
		t.Fatal(err)
	}
	cp.Publish(full)
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: front, RemoveAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, cp, h)
	url := "http://" + listen + "/"
	waitServing(t, url, []string{"a2"})
	state := func(name string) string { return listed(t, h, "www")[name].state }
	waitFor(t, func() error {
		if s := state("b1"); s != "maint" {
			return fmt.Errorf("b1 is %q, want maint once the topology is in", s)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ld := startLoad(ctx, url, 300, 12)
	const rounds, answers = 3, 150
	var took []time.Duration
	for range rounds {
		if err := cp.SetSites(droppedTopo); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		cp.Publish(dropped)
		waitFor(t, func() error {
			if s := state("a2"); s != "" {
				return fmt.Errorf("a2 still listed (%s); removals %+v", s, h.Removals())
			}
			return nil
		})
		took = append(took, time.Since(t0))
		if s := state("a1"); s != "ready" {
			t.Fatalf("a1 is %q after a2's removal", s)
		}
		ld.waitAnswers(t, t0, answers)
		if err := cp.SetSites(fullTopo); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		cp.Publish(full)
		ld.firstFrom(t, t1, []string{"a2"})
		ld.waitAnswers(t, t1, answers)
	}
	cancel()
	total, failed := ld.stop()
	refused := len(rec.sent("del server www/a2")) - rounds // the last of each round went through
	t.Logf("EDGE haproxy-removal: %d removals of a served origin under load, from the publication to its absence from show servers state %v (%d del server refused while requests were in flight); %d of %d GETs failed",
		rounds, rounded(took), refused, len(failed), total)
	report("haproxy-removal", took, len(failed), total)
	if len(failed) > 0 {
		t.Errorf("%d of %d GETs failed during the removals; first: %v", len(failed), total, failed[0])
	}
	for _, s := range a.EdgeStatus() {
		if s.Err != nil && !errors.Is(s.Err, context.Canceled) {
			t.Errorf("edge %s: %v", s.Edge, s.Err)
		}
	}
}
