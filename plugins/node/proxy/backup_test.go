package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// backupSite is site www at level 1 with origins named level (addresses
// http://127.0.0.1:1, :2, ...: pick never connects), a ramp from level 2
// of weight (none when 0) with origins from, and backup level 3 with
// origins backup (no Backup when none).
func backupSite(level, from, backup []string, weight int) *publication.Snapshot {
	port := 0
	origins := func(names []string, state string) []publication.Origin {
		var out []publication.Origin
		for _, n := range names {
			port++
			st := state
			if strings.HasPrefix(n, "sick") {
				st = "unhealthy"
			}
			out = append(out, publication.Origin{Name: n, Address: "http://127.0.0.1:" + strconv.Itoa(port), State: st})
		}
		return out
	}
	s := publication.Site{Name: "www", Hostname: "www.example.com", Level: 1, Origins: origins(level, "healthy")}
	if weight != 0 {
		s.Ramp = &publication.Ramp{Weight: weight, From: 2, FromOrigins: origins(from, "healthy")}
	}
	if len(backup) > 0 {
		s.Backup = &publication.Backup{Level: 3, Origins: origins(backup, "unknown")}
	}
	return &publication.Snapshot{Version: 1, Format: publication.FormatRamp, Sites: []publication.Site{s}}
}

// TestPickBackup: which origin pick chooses, tier by tier, with a backup
// level: the current level while any of its origins is neither skipped nor
// tried by this request, then the backup's, and a skipped origin of the
// current level only when every origin is skipped; without a Backup,
// pick is what it was.
func TestPickBackup(t *testing.T) {
	tests := []struct {
		name                  string
		level, from, backup   []string
		weight                int
		fromReq               bool            // the ramp sent the request to the level being left
		skipped, tried        map[string]bool // by origin name
		want                  []string        // the acceptable picks
		wantBackupOriginCount int
	}{
		{name: "no backup, all skipped: the current level", level: []string{"a1", "a2"},
			skipped: set("a1", "a2"), want: []string{"a1", "a2"}},
		{name: "no backup, one usable", level: []string{"a1", "a2"},
			skipped: set("a1"), want: []string{"a2"}},
		{name: "all skipped: the backup", level: []string{"a1", "a2"}, backup: []string{"b1"},
			skipped: set("a1", "a2"), want: []string{"b1"}, wantBackupOriginCount: 1},
		{name: "one usable: the current level", level: []string{"a1", "a2"}, backup: []string{"b1"},
			skipped: set("a1"), want: []string{"a2"}, wantBackupOriginCount: 1},
		{name: "one skipped, one tried: the backup", level: []string{"a1", "a2"}, backup: []string{"b1", "b2"},
			skipped: set("a1"), tried: set("a2"), want: []string{"b1", "b2"}, wantBackupOriginCount: 2},
		{name: "every current origin tried: the backup", level: []string{"a1", "a2"}, backup: []string{"b1"},
			tried: set("a1", "a2"), want: []string{"b1"}, wantBackupOriginCount: 1},
		{name: "unhealthy but not skipped: still the current level", level: []string{"sick1", "sick2"}, backup: []string{"b1"},
			want: []string{"sick1", "sick2"}, wantBackupOriginCount: 1},
		{name: "backup skipped too: a skipped current origin", level: []string{"a1", "a2"}, backup: []string{"b1"},
			skipped: set("a1", "a2", "b1"), want: []string{"a1", "a2"}, wantBackupOriginCount: 1},
		{name: "backup skipped, current tried: the skipped backup", level: []string{"a1"}, backup: []string{"b1"},
			skipped: set("b1"), tried: set("a1"), want: []string{"b1"}, wantBackupOriginCount: 1},
		{name: "ramp: the level being left before the backup", level: []string{"a1"}, from: []string{"f1"}, backup: []string{"b1"}, weight: 50,
			skipped: set("a1"), want: []string{"f1"}, wantBackupOriginCount: 1},
		{name: "ramp: both levels skipped: the backup", level: []string{"a1"}, from: []string{"f1"}, backup: []string{"b1"}, weight: 50,
			skipped: set("a1", "f1"), want: []string{"b1"}, wantBackupOriginCount: 1},
		{name: "ramp, request to the level left: both skipped: the backup", level: []string{"a1"}, from: []string{"f1"}, backup: []string{"b1"}, weight: 50,
			fromReq: true, skipped: set("a1", "f1"), want: []string{"b1"}, wantBackupOriginCount: 1},
		{name: "ramp, request to the level left: it first", level: []string{"a1"}, from: []string{"f1"}, backup: []string{"b1"}, weight: 50,
			fromReq: true, want: []string{"f1"}, wantBackupOriginCount: 1},
		{name: "ramp: everything skipped: the request's level", level: []string{"a1"}, from: []string{"f1"}, backup: []string{"b1"}, weight: 50,
			skipped: set("a1", "f1", "b1"), want: []string{"a1"}, wantBackupOriginCount: 1},
		{name: "no current origin at all: the backup", backup: []string{"b1"},
			want: []string{"b1"}, wantBackupOriginCount: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			p, err := New(Options{Now: clock.Now, FailCount: 1, SkipFor: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			p.SetSnapshot(backupSite(tt.level, tt.from, tt.backup, tt.weight))
			s := p.state.Load().sites["www.example.com"]
			if got := len(s.origins) - s.nRamp; got != tt.wantBackupOriginCount {
				t.Fatalf("%d backup origins, want %d", got, tt.wantBackupOriginCount)
			}
			tried := make([]bool, len(s.origins))
			for i := range s.origins {
				o := &s.origins[i]
				if tt.skipped[o.pub.Name] {
					p.track.failed(o.h) // FailCount 1: skipped at once
				}
				tried[i] = tt.tried[o.pub.Name]
			}
			// Every round-robin start gives one of the wanted origins.
			for range 4 {
				i := p.pick(s, append([]bool(nil), tried...), tt.fromReq)
				if i < 0 {
					t.Fatal("pick found nothing")
				}
				if name := s.origins[i].pub.Name; !slices.Contains(tt.want, name) {
					t.Fatalf("picked %s, want one of %v", name, tt.want)
				}
			}
		})
	}
}

// TestBackupDuplicatesRamp: a Backup that is the ramp's level being left
// adds no origin twice: the ramp's fallback already covers it.
func TestBackupDuplicatesRamp(t *testing.T) {
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := backupSite([]string{"a1"}, []string{"f1", "f2"}, nil, 20)
	site := &snap.Sites[0]
	site.Backup = &publication.Backup{Level: 2, Origins: site.Ramp.FromOrigins}
	p.SetSnapshot(snap)
	s := p.state.Load().sites["www.example.com"]
	if len(s.origins) != 3 || s.nLevel != 1 || s.nRamp != 3 {
		t.Fatalf("%d origins, nLevel %d, nRamp %d: want 3, 1, 3", len(s.origins), s.nLevel, s.nRamp)
	}
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// backupSnapshot is site www at level 1 with origins level and backup
// level 2 with origins backup, all real.
func backupSnapshot(level []*backend, levelAddrs []string, backup []*backend) *publication.Snapshot {
	s := publication.Site{Name: "www", Hostname: "www.example.com", Level: 1}
	for _, b := range level {
		s.Origins = append(s.Origins, publication.Origin{Name: b.name, Address: b.srv.URL, State: "healthy"})
	}
	for i, a := range levelAddrs {
		s.Origins = append(s.Origins, publication.Origin{Name: "dead" + strconv.Itoa(i+1), Address: a, State: "healthy"})
	}
	if len(backup) > 0 {
		s.Backup = &publication.Backup{Level: 2}
		for _, b := range backup {
			s.Backup.Origins = append(s.Backup.Origins, publication.Origin{Name: b.name, Address: b.srv.URL, State: "healthy"})
		}
	}
	return &publication.Snapshot{Version: 1, Sites: []publication.Site{s}}
}

// The ways the proxy is served: on its Server, as vigil-node does, and as
// an http.Handler behind httptest's server.
var backupPaths = []struct {
	name string
	raw  bool
	path string
}{
	{"server", true, "/page"},
	{"handler", false, "/page?q=1"},
}

// TestBackupServes: with the current level's origins answering 503 (or
// refusing connections), GETs are answered by the backup level on every
// path: at first as a retry once the current level's origin failed, and
// once every current origin is skipped, at once. The backup counter counts
// them, OnAttempt sees the attempts on the backup's origins, and a POST is
// never retried there.
func TestBackupServes(t *testing.T) {
	for _, path := range backupPaths {
		for _, refuse := range []bool{false, true} {
			name := path.name + "/503"
			if refuse {
				name = path.name + "/refused"
			}
			t.Run(name, func(t *testing.T) {
				b1 := newBackend(t, "b1", 200)
				var level []*backend
				var dead []string
				if refuse {
					dead = []string{deadAddress(t)}
				} else {
					level = []*backend{newBackend(t, "a1", 503)}
				}
				var mu sync.Mutex
				seen := map[string]int{}
				h := newHarnessOn(t, Options{FailCount: 3, OnAttempt: func(a Attempt) {
					mu.Lock()
					seen[a.Origin]++
					mu.Unlock()
				}}, backupSnapshot(level, dead, []*backend{b1}), path.raw)

				// A POST is never retried: the current level's failure is
				// passed on, and the backup sees nothing.
				resp, _ := h.do(t, http.MethodPost, "www.example.com", "order=1")
				if want := map[bool]int{false: 503, true: 502}[refuse]; resp.StatusCode != want || b1.hits.Load() != 0 {
					t.Fatalf("POST: status %d (want %d), backup hits %d (want 0)", resp.StatusCode, want, b1.hits.Load())
				}
				const n = 20
				for k := range n {
					if code := h.get(t, path.path); code != 200 {
						t.Fatalf("GET %d: status %d, want 200 from the backup", k, code)
					}
				}
				if b1.hits.Load() != n {
					t.Errorf("backup answered %d GETs, want %d", b1.hits.Load(), n)
				}
				// The POST and two GETs failed on the current origin: three
				// failures skip it; later GETs go to the backup at once.
				current := "a1"
				if refuse {
					current = "dead1"
				}
				mu.Lock()
				defer mu.Unlock()
				if seen[current] != 3 || seen["b1"] != n {
					t.Errorf("attempts seen %v, want %s 3 and b1 %d", seen, current, n)
				}
				if v := counter(t, h.p.m.backups.WithLabelValues("www")); v != n {
					t.Errorf("backup requests counter %v, want %d", v, n)
				}
				if v := counter(t, h.p.m.retries.WithLabelValues("www")); v != 2 {
					t.Errorf("retries %v, want 2 (the GETs before the skip)", v)
				}
			})
		}
	}
}

// TestBackupNotBeforeCurrentLevel: while an origin of the current level
// answers, the backup gets nothing: a retry after one current origin
// failed goes to the other, and the backup counter stays at 0.
func TestBackupNotBeforeCurrentLevel(t *testing.T) {
	for _, path := range backupPaths {
		t.Run(path.name, func(t *testing.T) {
			bad, good, b1 := newBackend(t, "bad", 503), newBackend(t, "good", 200), newBackend(t, "b1", 200)
			h := newHarnessOn(t, Options{FailCount: 1000}, backupSnapshot([]*backend{bad, good}, nil, []*backend{b1}), path.raw)
			for range 20 {
				if code := h.get(t, path.path); code != 200 {
					t.Fatalf("status %d", code)
				}
			}
			if b1.hits.Load() != 0 || good.hits.Load() != 20 || bad.hits.Load() == 0 {
				t.Errorf("bad %d good %d backup %d: want the backup at 0, good at 20", bad.hits.Load(), good.hits.Load(), b1.hits.Load())
			}
			if v := counter(t, h.p.m.backups.WithLabelValues("www")); v != 0 {
				t.Errorf("backup requests counter %v, want 0", v)
			}
		})
	}
}

// TestBackupWithinRetries: the backup is tried only within the request's
// retries: with two failing current origins not yet skipped and one
// retry, a GET fails on both and never reaches the backup; with no
// retries, nothing goes to the backup until the current level is skipped.
func TestBackupWithinRetries(t *testing.T) {
	a1, a2, b1 := newBackend(t, "a1", 503), newBackend(t, "a2", 503), newBackend(t, "b1", 200)
	h := newHarness(t, Options{Retries: 1, FailCount: 1000}, backupSnapshot([]*backend{a1, a2}, nil, []*backend{b1}))
	if code := h.get(t, "/page"); code != 503 || b1.hits.Load() != 0 || a1.hits.Load() != 1 || a2.hits.Load() != 1 {
		t.Fatalf("status %d, a1 %d a2 %d b1 %d: want 503 after one try on each current origin", code, a1.hits.Load(), a2.hits.Load(), b1.hits.Load())
	}
	h = newHarness(t, Options{Retries: NoRetries, FailCount: 2}, backupSnapshot([]*backend{a1}, nil, []*backend{b1}))
	codes := []int{h.get(t, "/page"), h.get(t, "/page"), h.get(t, "/page")}
	if codes[0] != 503 || codes[1] != 503 || codes[2] != 200 || b1.hits.Load() != 1 {
		t.Fatalf("without retries: statuses %v, backup hits %d; want 503, 503 (the skip), then 200 from the backup", codes, b1.hits.Load())
	}
}

// TestSkipProbation: once a skip ends, one failure skips the origin again
// (the backup serves on), until a success takes it off probation, after
// which FailCount failures are needed again.
func TestSkipProbation(t *testing.T) {
	a1, b1 := newBackend(t, "a1", 503), newBackend(t, "b1", 200)
	h := newHarness(t, Options{Retries: NoRetries, FailCount: 3, FailWindow: 10 * time.Second, SkipFor: 10 * time.Second},
		backupSnapshot([]*backend{a1}, nil, []*backend{b1}))
	for range 4 {
		h.get(t, "/page")
	}
	if a1.hits.Load() != 3 || b1.hits.Load() != 1 {
		t.Fatalf("a1 %d b1 %d, want 3 (skipped) and 1", a1.hits.Load(), b1.hits.Load())
	}
	h.clock.Add(11 * time.Second) // the skip ends: on probation
	codes := []int{h.get(t, "/page"), h.get(t, "/page"), h.get(t, "/page")}
	if codes[0] != 503 || codes[1] != 200 || codes[2] != 200 || a1.hits.Load() != 4 {
		t.Fatalf("after the skip: statuses %v, a1 %d; want one 503 (skipped again at once), then the backup", codes, a1.hits.Load())
	}
	if v := counter(t, h.p.m.skips.WithLabelValues("www", "a1")); v != 2 {
		t.Errorf("skips %v, want 2", v)
	}

	h.clock.Add(11 * time.Second)
	a1.status.Store(200)
	if code := h.get(t, "/page"); code != 200 || a1.hits.Load() != 5 {
		t.Fatalf("a1 recovered: status %d, a1 hits %d", code, a1.hits.Load())
	}
	// Off probation: two failures do not skip it, the third does.
	a1.status.Store(503)
	for range 2 {
		h.get(t, "/page")
	}
	if code := h.get(t, "/page"); code != 503 || a1.hits.Load() != 8 {
		t.Fatalf("off probation: the third failure: status %d a1 hits %d, want 503 and 8", code, a1.hits.Load())
	}
	if code := h.get(t, "/page"); code != 200 || a1.hits.Load() != 8 {
		t.Fatalf("after the third failure: status %d a1 hits %d, want the backup's 200 and 8", code, a1.hits.Load())
	}
}
