package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// smallDisk mounts a tmpfs of size bytes for the test, or skips (unless
// CI is set) where the platform does not allow it.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" && os.Geteuid() == 0 {
			t.Fatalf("cannot mount a size-limited tmpfs as root in CI: %v: %s", err, out)
		}
		t.Skipf("no size-limited filesystem here (mount tmpfs: %v: %s); the full-disk test needs root", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes to dir until the filesystem is full, and returns the file.
func fill(t *testing.T, dir string) string {
	t.Helper()
	return fillAs(t, dir, "filler")
}

// fillAs is fill into a file of the given name.
func fillAs(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
}

// TestFullDiskActionsAreRefusedAndChangeNothing: with data_dir full, a
// manual switch is refused (503, not_saved) and changes nothing; once
// there is room, the same switch is made and survives a restart.
func TestFullDiskActionsAreRefusedAndChangeNothing(t *testing.T) {
	disk := smallDisk(t, "2m")
	f := &fixture{dir: disk, tokenFile: filepath.Join(t.TempDir(), "token"), logs: &sdktest.LogBuffer{}}
	if err := os.WriteFile(f.tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := testnet.Addr(t)
	startIt := func() *agent.Agent {
		a, err := agent.Start(f.config(t, listen, ""), agent.Options{
			Logger:    hclog.New(&hclog.LoggerOptions{Output: f.logs}),
			NewSource: enginetest.Sources{}.Factory(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := startIt()
	filler := fill(t, disk)

	// Free pages inside the file can still take a few commits: switch
	// back and forth until the store needs room it cannot get.
	var refused bool
	for i := 0; i < 2000 && !refused; i++ {
		before := a.Engine().Views().Site("www")
		evs, _ := a.Engine().Events(t.Context(), 0, "", 100000)
		to := 3 - before.Level // 1 <-> 2
		code, e := switchTo(t, listen, to)
		switch code {
		case 200:
			continue
		case 503:
			refused = true
			if e.Code != "not_saved" || !strings.Contains(e.Hint, "full") {
				t.Fatalf("refusal %+v; want code not_saved and a hint that the disk is full", e)
			}
			after := a.Engine().Views().Site("www")
			evs2, _ := a.Engine().Events(t.Context(), 0, "", 100000)
			if after.Level != before.Level || after.Failback != before.Failback || len(evs2) != len(evs) {
				t.Fatalf("a refused switch changed something: level %d -> %d, failback %s -> %s, %d -> %d events",
					before.Level, after.Level, before.Failback, after.Failback, len(evs), len(evs2))
			}
		default:
			t.Fatalf("switch on a full disk answered %d %+v", code, e)
		}
	}
	if !refused {
		t.Fatal("2000 switches on a full disk were all saved: the test did not fill the store's room")
	}
	level := a.Engine().Views().Site("www").Level
	if got := metric(t, listen, "vigil_store_last_commit_successful"); got != "0" {
		t.Errorf("vigil_store_last_commit_successful %q on a full disk, want 0", got)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	want := 3 - level
	if code, e := switchTo(t, listen, want); code != 200 {
		t.Fatalf("after freeing space, the switch answers %d %+v", code, e)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	a = startIt()
	t.Cleanup(func() { _ = a.Stop() })
	if v := a.Engine().Views().Site("www"); v.Level != want {
		t.Fatalf("after a restart the site is on level %d, want %d: the switch made once there was room was lost", v.Level, want)
	}
}

type apiError struct{ Code, Message, Hint string }

func switchTo(t *testing.T, addr string, level int) (int, apiError) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/sites/www/switch", strings.NewReader(fmt.Sprintf(`{"level": %d}`, level)))
	req.Header.Set("Authorization", "Bearer first-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error apiError `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error
}

// alertmanager stands in for Alertmanager's POST /api/v2/alerts on
// loopback: it keeps the last copy of each alert by alertname and
// signals each post.
type alertmanager struct {
	*httptest.Server
	mu     sync.Mutex
	alerts map[string]notify.Alert
	posts  chan struct{}
}

func newAlertmanager(t *testing.T) *alertmanager {
	t.Helper()
	am := &alertmanager{alerts: map[string]notify.Alert{}, posts: make(chan struct{}, 1)}
	am.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []notify.Alert
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/api/v2/alerts" || json.Unmarshal(b, &got) != nil {
			http.Error(w, "not an alert post", http.StatusBadRequest)
			return
		}
		am.mu.Lock()
		for _, a := range got {
			am.alerts[a.Labels["alertname"]] = a
		}
		am.mu.Unlock()
		select {
		case am.posts <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(am.Close)
	return am
}

// await waits, post after post, until cond holds for the alert named
// name (ok is false when none was posted yet). The deadline only
// catches a hang.
func (am *alertmanager) await(t *testing.T, what, name string, cond func(a notify.Alert, ok bool, now time.Time) bool) notify.Alert {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		am.mu.Lock()
		a, ok := am.alerts[name]
		am.mu.Unlock()
		if cond(a, ok, time.Now()) {
			return a
		}
		select {
		case <-am.posts:
		case <-deadline:
			t.Fatalf("%s: Alertmanager did not get it within a minute (last %s: %+v, posted %v)", what, name, a, ok)
		}
	}
}

func firingNow(a notify.Alert, ok bool, now time.Time) bool   { return ok && a.EndsAt.After(now) }
func resolvedNow(a notify.Alert, ok bool, now time.Time) bool { return ok && !a.EndsAt.After(now) }

// TestFullDiskPagesAlertmanager fills a real data_dir and follows what
// an operator's Alertmanager gets: VigilStoreOnReserve once the state
// file writes into its space reserve (switches are still saved), then
// VigilStateNotSaved{reason="disk_full"} once the reserve too is full
// and a switch is refused, although nothing can be saved; once space is
// freed, the next commit resolves it, and (after the store's minute
// between tries) the reserve written again resolves the other.
func TestFullDiskPagesAlertmanager(t *testing.T) {
	disk := smallDisk(t, "8m")
	am := newAlertmanager(t)
	f := &fixture{dir: disk, tokenFile: filepath.Join(t.TempDir(), "token"), logs: &sdktest.LogBuffer{}}
	if err := os.WriteFile(f.tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := testnet.Addr(t)
	cfg := f.config(t, listen, fmt.Sprintf(`
notify "alertmanager" "am" {
  urls            = [%q]
  installation    = "fulldisk-test"
  resend_interval = "2s"
}`, am.URL))
	a, err := agent.Start(cfg, agent.Options{
		Logger:    hclog.New(&hclog.LoggerOptions{Output: f.logs}),
		NewSource: enginetest.Sources{}.Factory(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	reserve := filepath.Join(disk, store.ReserveFileName)
	if _, err := os.Stat(reserve); err != nil {
		t.Fatalf("the agent wrote no space reserve on an 8 MiB data_dir: %v", err)
	}
	flip := func() (int, apiError) {
		return switchTo(t, listen, 3-a.Engine().Views().Site("www").Level)
	}

	// Full: switches go on being saved, into the reserve.
	filler := fill(t, disk)
	for i := 0; ; i++ {
		if i == 5000 {
			t.Fatal("5000 switches on a full disk never needed the reserve: the test did not fill data_dir")
		}
		if code, e := flip(); code != 200 {
			t.Fatalf("switch %d on a full disk with the reserve held answered %d %+v; want it saved into the reserve", i, code, e)
		}
		if _, err := os.Stat(reserve); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	onReserve := am.await(t, "VigilStoreOnReserve", notify.AlertStoreOnReserve, firingNow)
	if onReserve.Labels["vigil"] != "fulldisk-test" || onReserve.Labels["instance"] == "" || onReserve.Annotations["command"] != "df -h "+disk {
		t.Errorf("VigilStoreOnReserve: %+v", onReserve)
	}
	if code, e := flip(); code != 200 {
		t.Fatalf("a switch after the reserve was released answered %d %+v; want it saved", code, e)
	}

	// The reserve's room filled too: a switch is refused, and the page
	// goes out although nothing can be saved.
	filler2 := fillAs(t, disk, "filler2")
	refused := false
	for i := 0; i < 5000 && !refused; i++ {
		switch code, e := flip(); code {
		case 200:
		case 503:
			refused = true
		default:
			t.Fatalf("switch on a full disk answered %d %+v", code, e)
		}
	}
	if !refused {
		t.Fatal("5000 switches were saved with the reserve's room filled too: the test did not fill data_dir")
	}
	notSaved := am.await(t, "VigilStateNotSaved", notify.AlertStateNotSaved, firingNow)
	if notSaved.Labels["reason"] != notify.ReasonDiskFull || notSaved.Labels["severity"] != "critical" ||
		!strings.Contains(notSaved.Annotations["description"], "no space left on device") {
		t.Errorf("VigilStateNotSaved: %+v", notSaved)
	}
	if got := metric(t, listen, `vigil_commit_failures_total{reason="disk_full"}`); got == "" || got == "0" {
		t.Errorf("vigil_commit_failures_total{reason=\"disk_full\"} = %q on a full disk", got)
	}
	if !strings.Contains(f.logs.String(), "the state cannot be saved") {
		t.Errorf("the log does not say the state cannot be saved:\n%s", f.logs)
	}

	// Space freed: the next commit is saved and resolves the page.
	for _, p := range []string{filler, filler2} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if code, e := flip(); code != 200 {
		t.Fatalf("after freeing space, the switch answered %d %+v", code, e)
	}
	am.await(t, "VigilStateNotSaved resolved", notify.AlertStateNotSaved, resolvedNow)

	if testing.Short() {
		return
	}
	// The store writes its reserve again at most once a minute, at a
	// commit: commit now and then until it does.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := os.Stat(reserve); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reserve was not written again within 3 minutes of freeing space")
		}
		if code, e := flip(); code != 200 {
			t.Fatalf("a switch with room again answered %d %+v", code, e)
		}
		time.Sleep(time.Second)
	}
	am.await(t, "VigilStoreOnReserve resolved", notify.AlertStoreOnReserve, resolvedNow)
}
