package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
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
	path := filepath.Join(dir, "filler")
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
