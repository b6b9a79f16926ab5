package nodeagent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigilcdn/vigil/sdk/publication"
)

func TestParseControlPlanes(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"http://10.0.0.5:8470", []string{"http://10.0.0.5:8470"}, ""},
		{"https://a:8470/, https://b:8470", []string{"https://a:8470", "https://b:8470"}, ""},
		{"http://a:1,,http://b:1", nil, "item 2 is empty"},
		{"a:8470", nil, `item 1 "a:8470" is not an API URL: write http://host:port`},
		{"ftp://a:1", nil, "is not an API URL"},
		{"http://a:1,http://a:1/", nil, "listed twice"},
		{"http://user:pw@a:1", nil, "-control-plane-token-env"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseControlPlanes(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "pw") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil || strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseGateways(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"10.0.0.5:8471", []string{"10.0.0.5:8471"}, ""},
		{"a:1, b:2", []string{"a:1", "b:2"}, ""},
		{"a:1,", nil, "item 2 is empty"},
		{"a:1,b", nil, `gateway address "b"`},
		{"a:1,a:1", nil, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGateways(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// fakeMember stands for one agent of a cluster: GET /v1/cluster with its
// role, GET /v1/publication long-polled as the API answers it (a
// follower ahead gets the current snapshot at once), or an error status
// for every request while down.
type fakeMember struct {
	srv *httptest.Server

	mu       sync.Mutex
	mode     string // "" : no cluster (404 at /v1/cluster)
	role     string
	leader   string // the leader's URL it names, confirmed
	version  uint64
	level    int
	down     int // a status answered to everything, 0: none
	changed  chan struct{}
	pubReads int
}

func newFakeMember(t *testing.T) *fakeMember {
	m := &fakeMember{changed: make(chan struct{}), mode: "active-standby", role: "standby"}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeMember) URL() string { return m.srv.URL }

func (m *fakeMember) set(f func(m *fakeMember)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *fakeMember) reads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pubReads
}

func (m *fakeMember) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	if m.down != 0 {
		m.mu.Unlock()
		http.Error(w, "down", m.down)
		return
	}
	switch r.URL.Path {
	case "/v1/cluster":
		defer m.mu.Unlock()
		if m.mode == "" {
			http.NotFound(w, r)
			return
		}
		info := map[string]any{"id": m.srv.URL, "url": m.srv.URL, "mode": m.mode, "role": m.role, "acting": m.role == "leader" || m.role == "shard"}
		if m.leader != "" {
			info["leader"] = map[string]string{"id": m.leader, "url": m.leader}
			info["leader_confirmed"] = true
		}
		_ = json.NewEncoder(w).Encode(info)
		return
	case "/v1/publication":
	default:
		m.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	m.pubReads++
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	for m.version == after {
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(wait):
			w.WriteHeader(http.StatusNotModified)
			return
		case <-r.Context().Done():
			return
		}
		m.mu.Lock()
		if m.down != 0 {
			m.mu.Unlock()
			http.Error(w, "down", m.down)
			return
		}
	}
	snap := publication.Snapshot{Version: m.version, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: m.level, Origins: []publication.Origin{}}}}
	m.mu.Unlock()
	_ = json.NewEncoder(w).Encode(snap)
}

// followAgent runs an agent that follows cps (comma-separated) and
// returns a channel of the versions it applies.
func followAgent(t *testing.T, cps string, log hclog.Logger) (*Agent, <-chan uint64) {
	t.Helper()
	versions := make(chan uint64, 64)
	if log == nil {
		log = hclog.NewNullLogger()
	}
	a, err := New(Config{ControlPlane: cps, PollWait: 200 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Log: log, OnEvent: func(e Event) {
			if e.Kind == EventPublication {
				versions <- e.Version
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return a, versions
}

// waitVersion waits for version v to be applied; the deadline only
// catches a hang.
func waitVersion(t *testing.T, versions <-chan uint64, v uint64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-versions:
			if got == v {
				return
			}
		case <-deadline:
			t.Fatalf("version %d never applied", v)
		}
	}
}

// lockedLog is a logger whose output the test reads.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFollowLeaderAcrossTakeover: two agents, the node lists the standby
// first. It follows the leader that GET /v1/cluster names; when the
// leader dies, it moves to the other, which takes over and publishes the
// next version; the node serves it.
func TestFollowLeaderAcrossTakeover(t *testing.T) {
	a, b := newFakeMember(t), newFakeMember(t)
	a.set(func(m *fakeMember) { m.role, m.leader, m.version, m.level = "leader", a.URL(), 2, 1 })
	b.set(func(m *fakeMember) { m.leader, m.version, m.level = a.URL(), 2, 1 })
	node, versions := followAgent(t, b.URL()+","+a.URL(), nil)
	waitVersion(t, versions, 2)
	// It follows the leader: the standby named it.
	deadline := time.Now().Add(30 * time.Second)
	for a.reads() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a.reads() == 0 {
		t.Fatal("the node never asked the leader for the publication")
	}

	// The leader dies; the standby takes over and fails www over.
	a.set(func(m *fakeMember) { m.down = http.StatusBadGateway })
	b.set(func(m *fakeMember) { m.role, m.leader, m.version, m.level = "leader", b.URL(), 3, 2 })
	waitVersion(t, versions, 3)
	if s := node.Snapshot(); s.Version != 3 || s.Sites[0].Level != 2 {
		t.Fatalf("node serves %+v, want version 3 at level 2", s)
	}
	if got := testutil.ToFloat64(node.metrics.version); got != 3 {
		t.Fatalf("vigil_node_publication_version = %v, want 3", got)
	}
}

// TestFollowNeverGoesBack: a node serving version 5 is offered version 3
// by a standby that has not caught up: refused, logged, counted, and the
// node keeps 5. When the acting leader itself offers 3 (its store's
// history restarted), or a lone control plane does, the node follows it.
func TestFollowNeverGoesBack(t *testing.T) {
	tests := []struct {
		name   string
		mode   string
		role   string
		follow bool
	}{
		{"standby behind: refused", "active-standby", "standby", false},
		{"shard behind: refused", "sharded", "shard", false},
		{"acting leader restarted: followed", "active-standby", "leader", true},
		{"lone control plane restarted: followed", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeMember(t)
			m.set(func(m *fakeMember) { m.mode, m.role, m.version, m.level = tt.mode, "leader", 5, 1 })
			if tt.mode == "sharded" {
				m.set(func(m *fakeMember) { m.role = "shard" })
			}
			log := &lockedLog{}
			node, versions := followAgent(t, m.URL(), hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Debug}))
			waitVersion(t, versions, 5)
			m.set(func(m *fakeMember) { m.role, m.version, m.level = tt.role, 3, 2 })
			if tt.follow {
				waitVersion(t, versions, 3)
				if !strings.Contains(log.String(), "back to an older version") {
					t.Fatalf("going back was not logged:\n%s", log.String())
				}
				return
			}
			deadline := time.Now().Add(30 * time.Second)
			for testutil.ToFloat64(node.metrics.refused) < 2 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := testutil.ToFloat64(node.metrics.refused); got < 2 {
				t.Fatalf("refused %v older publications, want 2 or more", got)
			}
			if s := node.Snapshot(); s.Version != 5 || s.Sites[0].Level != 1 {
				t.Fatalf("node serves %+v, want version 5 still", s)
			}
			if l := log.String(); !strings.Contains(l, "refused an older publication") || !strings.Contains(l, "offered=3 served=5") {
				t.Fatalf("the refusal is not logged with both versions:\n%s", l)
			}
		})
	}
}

// TestFollowPick: which control plane pick chooses from what each says.
func TestFollowPick(t *testing.T) {
	a, b, c := newFakeMember(t), newFakeMember(t), newFakeMember(t)
	cp := newControlPlanes([]string{a.URL(), b.URL(), c.URL()}, "", nil, time.Second)
	ctx := context.Background()
	// c leads; a names it.
	a.set(func(m *fakeMember) { m.leader = c.URL() })
	c.set(func(m *fakeMember) { m.role, m.leader = "leader", c.URL() })
	if got, _ := cp.pick(ctx, ""); got != c.URL() {
		t.Fatalf("pick = %s, want the acting leader %s", got, c.URL())
	}
	// c is down: a names it still, but it is avoided; b answers first.
	c.set(func(m *fakeMember) { m.down = http.StatusServiceUnavailable })
	if got, errs := cp.pick(ctx, c.URL()); got != a.URL() || len(errs) != 1 {
		t.Fatalf("pick = %s (%v), want the first that answered, %s", got, errs, a.URL())
	}
	// Not even asked to avoid it: a named leader that did not answer
	// itself is not followed (a standby names a dead leader until its
	// lease ends).
	if got, _ := cp.pick(ctx, ""); got != a.URL() {
		t.Fatalf("pick = %s, want %s, not the dead leader", got, a.URL())
	}
	// Nothing answers.
	a.set(func(m *fakeMember) { m.down = http.StatusServiceUnavailable })
	b.set(func(m *fakeMember) { m.down = http.StatusServiceUnavailable })
	if got, errs := cp.pick(ctx, ""); got != "" || len(errs) != 3 {
		t.Fatalf("pick = %q (%d errors), want none", got, len(errs))
	}
}

// TestControlPlanesList: the reads of GET /v1/sites ask the agent the
// publication is followed from first, then the others in their order.
func TestControlPlanesList(t *testing.T) {
	cp := newControlPlanes([]string{"http://a:1", "http://b:1", "http://c:1"}, "", nil, time.Second)
	if got := cp.list(); got != "http://a:1,http://b:1,http://c:1" {
		t.Fatalf("list = %s before following any", got)
	}
	b := "http://b:1"
	cp.following.Store(&b)
	if got := cp.list(); got != "http://b:1,http://a:1,http://c:1" {
		t.Fatalf("list = %s following b", got)
	}
}

// TestFollowPickLearnsTheLeader: a listed standby names a confirmed
// leader that is not listed: the node follows it (it learns the cluster
// from GET /v1/cluster).
func TestFollowPickLearnsTheLeader(t *testing.T) {
	listed, unlisted := newFakeMember(t), newFakeMember(t)
	listed.set(func(m *fakeMember) { m.leader = unlisted.URL() })
	cp := newControlPlanes([]string{listed.URL()}, "", nil, time.Second)
	if got, _ := cp.pick(context.Background(), ""); got != unlisted.URL() {
		t.Fatalf("pick = %s, want the named leader %s", got, unlisted.URL())
	}
}

// TestExplainStatus: a refused token and plain http to an https API say
// what to do; other errors pass unchanged.
func TestExplainStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"refused token", &publication.StatusError{Code: http.StatusUnauthorized, Status: "401 Unauthorized"},
			"give -control-plane-token-env naming a variable that holds a token of the node scope"},
		{"forbidden", &publication.StatusError{Code: http.StatusForbidden, Status: "403 Forbidden"}, "node scope"},
		{"http to https", &publication.StatusError{Code: http.StatusBadRequest, Status: "400 Bad Request", Body: "Client sent an HTTP request to an HTTPS server."},
			"use an https:// address in -control-plane"},
		{"other status", &publication.StatusError{Code: http.StatusInternalServerError, Status: "500 Internal Server Error", Body: "boom"}, "500 Internal Server Error: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := explainStatus(tt.err).Error(); !strings.Contains(got, tt.want) {
				t.Fatalf("explainStatus = %q, want %q in it", got, tt.want)
			}
		})
	}
}
