package edge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// daemon's cleanup stops nginx's workers with their master: a SIGKILL of
// the master alone left them running, orphaned, after every test and
// benchmark that ran nginx.
func TestDaemonStopsNginxWorkers(t *testing.T) {
	bin := peer(t, "nginx")
	var workers []int
	t.Run("nginx runs", func(t *testing.T) {
		dir := t.TempDir()
		conf := filepath.Join(dir, "nginx.conf")
		writeFile(t, conf, nginxConfig(dir, "2", 64, "    server { listen "+testnet.Addr(t)+"; }"))
		cmd := daemon(t, dir, bin, "-p", dir, "-c", conf, "-e", dir+"/error.log")
		deadline := time.Now().Add(10 * time.Second)
		for len(workers) < 2 && time.Now().Before(deadline) {
			workers = children(cmd.Process.Pid)
			time.Sleep(20 * time.Millisecond) // nginx says nothing when its workers are up
		}
		if len(workers) < 2 {
			t.Fatalf("nginx started %d workers, want 2", len(workers))
		}
	}) // daemon's cleanup runs here
	for _, pid := range workers {
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("nginx worker %d still runs after its master was stopped", pid)
			}
			time.Sleep(20 * time.Millisecond) // no signal tells a non-parent that a process ended
		}
	}
}

// children are pid's child processes.
func children(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
