package nodeagent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

func snapAt(version uint64, level int, origins ...publication.Origin) *publication.Snapshot {
	return &publication.Snapshot{Version: version, Sites: []publication.Site{
		{Name: "www", Hostname: "www.example.com", Level: level, Origins: origins},
		{Name: "api", Hostname: "api.example.com", Level: 1, Origins: []publication.Origin{{Name: "c1", Address: "http://127.0.0.1:3"}}},
	}}
}

var (
	a1 = publication.Origin{Name: "a1", Address: "http://127.0.0.1:1", State: "unhealthy"}
	b1 = publication.Origin{Name: "b1", Address: "http://127.0.0.1:2", State: "healthy"}
)

// sink collects the acknowledgements an acks sends.
type sink struct {
	mu  sync.Mutex
	got []publication.Applied
	err error
}

func (s *sink) send(_ context.Context, target string, a publication.Applied) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if target != "http://cp" {
		return errors.New("wrong control plane " + target)
	}
	s.got = append(s.got, a)
	return s.err
}

func (s *sink) all() []publication.Applied {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]publication.Applied(nil), s.got...)
}

func newTestAcks(t *testing.T, proxying bool, drivers int) (*acks, *sink) {
	t.Helper()
	k := newAcks("edge-1", proxying, drivers, hclog.NewNullLogger())
	s := &sink{}
	k.send = s.send
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		k.wait()
	})
	k.start(ctx, nil, "")
	return k, s
}

// TestChangesCountTheLevelLeft: only the sites whose level changed are
// reported, each with its passive windows' counts of the level it left.
func TestChangesCountTheLevelLeft(t *testing.T) {
	p, err := newPassive(PassiveConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, status := range []int{200, 500, 502, 200} {
		p.record(proxy.Attempt{Site: "www", Origin: "a1", Address: a1.Address, Status: status, Method: "GET", Path: "/"})
	}
	p.record(proxy.Attempt{Site: "api", Origin: "c1", Address: "http://127.0.0.1:3", Status: 500})
	for _, tc := range []struct {
		name       string
		prev, next *publication.Snapshot
		want       []publication.AppliedSite
	}{
		{"failover", snapAt(4, 1, a1), snapAt(5, 2, b1), []publication.AppliedSite{{Site: "www", FromLevel: 1, ToLevel: 2, Requests: 4, Failures: 2}}},
		{"same level", snapAt(4, 1, a1), snapAt(5, 1, a1), nil},
		{"first publication", nil, snapAt(5, 2, b1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, left := changes(tc.prev, tc.next, p)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Site != tc.want[i].Site || got[i].FromLevel != tc.want[i].FromLevel || got[i].ToLevel != tc.want[i].ToLevel ||
					got[i].Requests != tc.want[i].Requests || got[i].Failures != tc.want[i].Failures {
					t.Errorf("got %+v, want %+v", got[i], tc.want[i])
				}
				if o := left[got[i].Site]; len(o) != 1 || o[0] != "a1" {
					t.Errorf("left origins %v, want [a1]", o)
				}
			}
		})
	}
	// Counting has no side effect on the window.
	if n, f := p.counts(a1.Address); n != 4 || f != 2 {
		t.Fatalf("counts %d/%d, want 4/2", n, f)
	}
}

// TestAcknowledgeProxyApply: a node without edges acknowledges a version
// when its proxy took it, with the last request sent to the level left.
func TestAcknowledgeProxyApply(t *testing.T) {
	k, s := newTestAcks(t, true, 0)
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	k.now = func() time.Time { return t0 }
	k.attempt(proxy.Attempt{Site: "www", Origin: "a1", Latency: 30 * time.Millisecond})
	k.attempt(proxy.Attempt{Site: "www", Origin: "b1"}) // another level: not counted
	sites, left := changes(snapAt(4, 1, a1), snapAt(5, 2, b1), nil)
	p := k.expect("http://cp", snapAt(5, 2, b1), sites, left)
	k.applied(p)
	k.wait()
	got := s.all()
	if len(got) != 1 {
		t.Fatalf("%d acknowledgements, want 1", len(got))
	}
	a := got[0]
	if a.Node != "edge-1" || a.Version != 5 || !a.At.Equal(t0) || a.Error != "" || !a.Proxying || len(a.Sites) != 1 {
		t.Fatalf("ack %+v", a)
	}
	if lr := a.Sites[0].LastRequest; lr == nil || !lr.Equal(t0.Add(-30*time.Millisecond)) {
		t.Fatalf("last request %v, want the attempt's start", lr)
	}
}

// TestAcknowledgeWaitsForEveryEdge: with edges, a version is acknowledged
// once every edge applied it (or a later one), at the last apply's time,
// or at the first refusal, with its error.
func TestAcknowledgeWaitsForEveryEdge(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	t.Run("every edge", func(t *testing.T) {
		k, s := newTestAcks(t, false, 2)
		k.expect("http://cp", snapAt(5, 2, b1), nil, nil)
		k.edgeApplied(edge.Applied{Edge: "haproxy", Version: 5, At: t0})
		k.edgeApplied(edge.Applied{Edge: "template:nginx", Version: 4, At: t0.Add(time.Millisecond)})
		k.wait()
		if n := len(s.all()); n != 0 {
			t.Fatalf("%d acknowledgements before the second edge applied 5", n)
		}
		k.edgeApplied(edge.Applied{Edge: "template:nginx", Version: 6, At: t0.Add(2 * time.Millisecond)})
		k.wait()
		got := s.all()
		if len(got) != 1 || got[0].Version != 5 || !got[0].At.Equal(t0.Add(2*time.Millisecond)) || got[0].Error != "" {
			t.Fatalf("acks %+v", got)
		}
	})
	t.Run("refused", func(t *testing.T) {
		k, s := newTestAcks(t, false, 1)
		k.expect("http://cp", snapAt(5, 2, b1), nil, nil)
		k.edgeApplied(edge.Applied{Edge: "haproxy", Version: 5, At: t0, Err: errors.New("runtime API: no such backend")})
		k.wait()
		got := s.all()
		if len(got) != 1 || got[0].Error != "edge haproxy: runtime API: no such backend" || !got[0].At.Equal(t0) {
			t.Fatalf("acks %+v", got)
		}
	})
	t.Run("older control plane", func(t *testing.T) {
		k, s := newTestAcks(t, false, 0)
		s.err = publication.ErrAcknowledgeUnsupported
		k.applied(k.expect("http://cp", snapAt(5, 2, b1), nil, nil))
		k.wait()
		k.applied(k.expect("http://cp", snapAt(6, 2, b1), nil, nil))
		k.wait()
		if n := len(s.all()); n != 1 {
			t.Fatalf("%d sends to a control plane that takes none, want 1", n)
		}
		// Once it answers again after an outage, it is asked again.
		s.err = nil
		k.hello("http://cp", snapAt(6, 2, b1), true)
		k.wait()
		k.applied(k.expect("http://cp", snapAt(7, 2, b1), nil, nil))
		k.wait()
		if n := len(s.all()); n != 3 {
			t.Fatalf("%d sends after the outage, want 3", n)
		}
	})
}

// BenchmarkAckAttempt is what noting the last request sent to each origin
// costs the proxy per attempt, from parallel requests (a mutex and a map
// write).
func BenchmarkAckAttempt(b *testing.B) {
	k := newAcks("edge-1", true, 0, hclog.NewNullLogger())
	origins := []string{"a1", "a2", "b1", "b2"}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k.attempt(proxy.Attempt{Site: "www", Origin: origins[i%len(origins)], Latency: time.Millisecond})
			i++
		}
	})
}

// TestHelloResendsTheLastAcknowledgement: a control plane the node starts
// following hears of the version served: the last acknowledgement when
// it is that version's, else the version alone.
func TestHelloResendsTheLastAcknowledgement(t *testing.T) {
	k, s := newTestAcks(t, true, 0)
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	k.now = func() time.Time { return t0 }
	k.hello("http://cp", nil, false) // nothing served yet: nothing to say
	k.hello("http://cp", snapAt(3, 1, a1), false)
	k.wait()
	k.now = func() time.Time { return t0.Add(time.Second) }
	sites, left := changes(snapAt(3, 1, a1), snapAt(4, 2, b1), nil)
	k.applied(k.expect("http://cp", snapAt(4, 2, b1), sites, left))
	k.wait()
	k.now = func() time.Time { return t0.Add(time.Minute) }
	k.hello("http://cp", snapAt(4, 2, b1), false)
	k.wait()
	got := s.all()
	if len(got) != 3 {
		t.Fatalf("%d sends, want 3: %+v", len(got), got)
	}
	if got[0].Version != 3 || !got[0].At.Equal(t0) || len(got[0].Sites) != 0 {
		t.Errorf("first hello %+v", got[0])
	}
	if got[2].Version != 4 || !got[2].At.Equal(t0.Add(time.Second)) || len(got[2].Sites) != 1 {
		t.Errorf("hello after the ack %+v, want the ack again", got[2])
	}
}
