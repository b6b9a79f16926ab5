package ha

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// stopHang is how long a stop may take before the test calls it a hang:
// far above StopTimeout, which the node itself enforces.
const stopHang = 30 * time.Second

// TestStopWhileEtcdDies: instances stopped at the moment etcd is killed
// (SIGKILL) all stop, each without hitting StopTimeout (a stop that had
// to be forced means some call to etcd had no deadline). The issue's
// case: a standby campaigning for the leadership, cancelled while etcd
// goes away, resigned with a context that never ended. Many tries, in
// both modes, with etcd killed just before, at, or just after the stop.
func TestStopWhileEtcdDies(t *testing.T) {
	const tries = 12
	for i := range tries {
		mode := []string{config.ModeActiveStandby, config.ModeSharded}[i%2]
		order := []string{"kill first", "together", "stop first"}[i%3]
		t.Run(fmt.Sprintf("%d %s %s", i, mode, order), func(t *testing.T) {
			srv := etcdtest.Start(t)
			ms := []*member{
				startMember(t, srv, "a", mode, manySites(40)),
				startMember(t, srv, "b", mode, manySites(40)),
			}
			if mode == config.ModeActiveStandby {
				settled(t, ms, 20*time.Second)
			} else {
				waitFor(t, "both shards acting", 20*time.Second, func() bool {
					return ms[0].node.Active() && ms[1].node.Active() && len(ms[0].node.Info().Members) == 2
				})
			}
			var wg sync.WaitGroup
			stopAll := func() {
				for _, m := range ms {
					wg.Add(1)
					go func() { defer wg.Done(); m.stop() }()
				}
			}
			switch order {
			case "kill first":
				srv.Kill()
				stopAll()
			case "together":
				wg.Add(1)
				go func() { defer wg.Done(); srv.Kill() }()
				stopAll()
			case "stop first":
				stopAll()
				srv.Kill()
			}
			wg.Wait()
			for _, m := range ms {
				select {
				case <-m.done:
				case <-time.After(stopHang):
					t.Fatalf("%s did not stop in %s: a stop hangs on etcd", m.id, stopHang)
				}
				if n := m.node.ForcedStops(); n != 0 {
					t.Errorf("%s stopped only by StopTimeout (%d): a call to etcd had no deadline", m.id, n)
				}
			}
		})
	}
}
