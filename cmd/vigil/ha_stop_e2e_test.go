package main

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/ha"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// TestHAStopWhileEtcdDies is issue 29's hang, end to end: a leader and a
// standby (40 sites) get SIGTERM at the moment etcd is killed (SIGKILL),
// and both exit, try after try. The wait is a hang catcher, not a timing
// assertion; each stop's duration is logged. Before the fix a standby
// campaigning for the leadership hung in 4 tries of 10.
func TestHAStopWhileEtcdDies(t *testing.T) {
	const tries = 5
	origin := httptest.NewServer(&hostCounter{n: map[string]int{}})
	t.Cleanup(origin.Close)
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "site \"s%02d\" {\n  hostname = \"s%02d.example.com\"\n  origin \"a\" { address = %q }\n  origin \"b\" { address = %q }\n}\n", i, i, origin.URL, origin.URL)
	}
	for i := range tries {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			srv := etcdtest.Start(t)
			procs := []*agentProc{
				startMember(t, "cp-a", srv.Endpoint, "active-standby", b.String()),
				startMember(t, "cp-b", srv.Endpoint, "active-standby", b.String()),
			}
			waitFor(t, "a leader and a standby", 30*time.Second, func() bool {
				roles := map[string]int{}
				for _, p := range procs {
					if info, ok := p.cluster(t); ok {
						roles[info.Role]++
					}
				}
				return roles[ha.RoleLeader] == 1 && roles[ha.RoleStandby] == 1
			})
			// etcd dies first (odd tries) or at the same moment (even ones).
			var wg sync.WaitGroup
			if i%2 == 1 {
				srv.Kill()
			} else {
				wg.Add(1)
				go func() { defer wg.Done(); srv.Kill() }()
			}
			start := time.Now()
			for _, p := range procs {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			for _, p := range procs {
				select {
				case <-p.done:
					t.Logf("an agent exited %s after SIGTERM, etcd killed at the same moment", time.Since(start).Round(10*time.Millisecond))
				case <-time.After(hangGuard(60 * time.Second)):
					t.Fatalf("an agent did not exit within 5 minutes of SIGTERM with etcd killed at the same moment:\n%s", p.logText())
				}
			}
		})
	}
}
