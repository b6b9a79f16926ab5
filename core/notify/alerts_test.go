package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/notify"
)

// fakeAM is an Alertmanager's POST /api/v2/alerts (under any path
// prefix, as behind a proxy): it keeps the alerts it
// got by alertname+site+origin, the last copy winning, and signals each
// post.
type fakeAM struct {
	*httptest.Server
	mu     sync.Mutex
	alerts map[string]notify.Alert
	posts  chan struct{}
	down   atomic.Bool
}

func newFakeAM(t *testing.T) *fakeAM {
	am := &fakeAM{alerts: map[string]notify.Alert{}, posts: make(chan struct{}, 1000)}
	am.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/api/v2/alerts") || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if am.down.Load() {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		var got []notify.Alert
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		am.mu.Lock()
		for _, a := range got {
			am.alerts[a.Labels["alertname"]+"/"+a.Labels["site"]+"/"+a.Labels["origin"]] = a
		}
		am.mu.Unlock()
		am.posts <- struct{}{}
	}))
	t.Cleanup(am.Close)
	return am
}

// firing is the alert under key if Alertmanager would show it firing now.
func (am *fakeAM) firing(key string, now time.Time) (notify.Alert, bool) {
	am.mu.Lock()
	defer am.mu.Unlock()
	a, ok := am.alerts[key]
	return a, ok && a.EndsAt.After(now)
}

func (am *fakeAM) get(key string) (notify.Alert, bool) {
	am.mu.Lock()
	defer am.mu.Unlock()
	a, ok := am.alerts[key]
	return a, ok
}

func (am *fakeAM) reset() {
	am.mu.Lock()
	am.alerts = map[string]notify.Alert{}
	am.mu.Unlock()
}

func (am *fakeAM) waitPost(t *testing.T) {
	t.Helper()
	select {
	case <-am.posts:
	case <-time.After(wait):
		t.Fatalf("no POST to Alertmanager within %s", wait)
	}
}

// TestAlertmanagerGetsStates: alerts are states, sent to every
// Alertmanager again at each resend interval and resolved when the state
// ends; an Alertmanager that lost its alerts has them back within one
// interval.
func TestAlertmanagerGetsStates(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	am1, am2 := newFakeAM(t), newFakeAM(t)
	var mu sync.Mutex
	states := []notify.SiteAlerts{
		{Site: "www", Level: 2, TopLevel: 1, Unhealthy: []notify.UnhealthyOrigin{{Name: "a1", Level: 1}, {Name: "a2", Level: 1}},
			Flapping: []notify.UnhealthyOrigin{{Name: "a1", Level: 1}}},
		{Site: "shop", Level: 2, TopLevel: 1, AllUnhealthy: true},
	}
	source := func(yield func(notify.SiteAlerts)) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range states {
			yield(s)
		}
	}
	const resend = 200 * time.Millisecond
	n := &config.Notifier{Kind: config.NotifierAlertmanager, Name: "am", URLs: []string{am1.URL, am2.URL + "/"},
		Installation: "test-eu", ResendInterval: resend, Timeout: wait}
	d, err := notify.New(st, []*config.Notifier{n}, nil, notify.WithAlertStates(source),
		notify.WithExternalURL(func() string { return "http://vigil.example.com:8470" }))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	am1.waitPost(t)
	am2.waitPost(t)
	for _, am := range []*fakeAM{am1, am2} {
		now := time.Now()
		a, ok := am.firing("VigilSiteOnBackupLevel/www/", now)
		if !ok || a.Labels["vigil"] != "test-eu" || a.Labels["level"] != "2" || a.GeneratorURL != "http://vigil.example.com:8470/#/site/www" {
			t.Fatalf("VigilSiteOnBackupLevel: %+v %v", a, ok)
		}
		if a.EndsAt.Before(now.Add(2 * resend)) {
			t.Errorf("endsAt %v is not a few intervals ahead of %v", a.EndsAt, now)
		}
		if _, ok := am.firing("VigilOriginUnhealthy/www/a2", now); !ok {
			t.Errorf("no VigilOriginUnhealthy for a2")
		}
		if a, ok := am.firing("VigilOriginFlapping/www/a1", now); !ok || a.Labels["level"] != "1" {
			t.Errorf("VigilOriginFlapping for a1: %+v %v", a, ok)
		}
		if a, ok := am.firing("VigilAllLevelsUnhealthy/shop/", now); !ok || a.Labels["severity"] != "critical" {
			t.Errorf("VigilAllLevelsUnhealthy: %+v %v", a, ok)
		}
	}

	// Alertmanager 1 restarts and loses everything: within one interval
	// it has the firing alerts again (Alertmanager 2 is not disturbed).
	am1.down.Store(true)
	am1.reset()
	eventually(t, "a send to the restarting Alertmanager to fail", func() bool {
		return metric(t, d, "vigil_notify_retries_total", map[string]string{"notifier": "am"}) >= 1
	})
	am1.down.Store(false)
	for range 2 {
		am1.waitPost(t)
	}
	if _, ok := am1.firing("VigilAllLevelsUnhealthy/shop/", time.Now()); !ok {
		t.Fatal("after its restart Alertmanager 1 did not get the firing alert back")
	}

	// shop recovers and fails back; www's a2 recovers: their alerts are
	// sent resolved.
	mu.Lock()
	states = []notify.SiteAlerts{{Site: "www", Level: 2, TopLevel: 1, Unhealthy: []notify.UnhealthyOrigin{{Name: "a1", Level: 1}}}}
	mu.Unlock()
	d.Wake()
	deadline := time.Now().Add(wait)
	for {
		am2.waitPost(t)
		now := time.Now()
		a, ok := am2.get("VigilAllLevelsUnhealthy/shop/")
		_, a2Firing := am2.firing("VigilOriginUnhealthy/www/a2", now)
		if ok && !a.EndsAt.After(now) && !a2Firing {
			break
		}
		if now.After(deadline) {
			t.Fatal("the ended states were not sent resolved")
		}
	}
	if _, ok := am2.firing("VigilOriginUnhealthy/www/a1", time.Now()); !ok {
		t.Error("a1, still unhealthy, was resolved too")
	}
}
