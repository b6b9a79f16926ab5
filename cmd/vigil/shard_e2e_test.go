package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/ha"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// shardLeaseTTL is TestShardedRun's lease_ttl: long enough that no
// member of a loaded machine loses its lease by a stall.
const shardLeaseTTL = 10 * time.Second

// metric is the sum of the unlabelled samples of name on p's /metrics.
func (p *agentProc) metric(t *testing.T, name string) float64 {
	t.Helper()
	// The agent group only: a full page makes every site's series at each
	// poll, which at tens of thousands of sites would weigh on what is measured.
	resp, err := http.Get(p.api + "/metrics?collect[]=agent")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			sum += f
		}
	}
	return sum
}

// hostCounter is an origin that counts probes per Host header.
type hostCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *hostCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.n[r.Host]++
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// allAtLeast reports whether each of hosts got at least n probes.
func (h *hostCounter) allAtLeast(hosts []string, n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, host := range hosts {
		if h.n[host] < n {
			return false
		}
	}
	return true
}

func (h *hostCounter) reset() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.n
	h.n = map[string]int{}
	return old
}

// TestShardedRun: three instances share 300 sites, every site is probed
// by exactly one instance; after one is killed every site is still probed.
// The probes are counted over rounds the instances report having run
// (vigil_rounds_total), not over a stretch of wall-clock time, and the
// lease outlives a loaded machine's stalls: the test is about the shares,
// not the lease's expiry (TestHAFailover and TestEtcdUnreachable are).
func TestShardedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	srv := etcdtest.Start(t)
	origin := &hostCounter{n: map[string]int{}}
	h := httptest.NewServer(origin)
	t.Cleanup(h.Close)
	const sites = 300
	var b strings.Builder
	b.WriteString("\n")
	for i := range sites {
		fmt.Fprintf(&b, "site \"s%03d\" {\n  hostname = \"s%03d.example.com\"\n  origin \"a\" { address = %q }\n  origin \"b\" { address = %q }\n}\n", i, i, h.URL, h.URL)
	}
	var procs []*agentProc
	for _, id := range []string{"cp-a", "cp-b", "cp-c"} {
		procs = append(procs, startMemberLease(t, id, srv.Endpoint, "sharded", haRound, shardLeaseTTL, b.String()))
	}
	shares := func(ps []*agentProc) (map[string]string, bool) {
		owner := map[string]string{}
		for _, p := range ps {
			info, ok := p.cluster(t)
			if !ok || info.Role != ha.RoleShard || !info.Acting || len(info.Members) != len(ps) {
				return nil, false
			}
			// Settled means the rendezvous shares are in place, not just
			// that someone owns every site: right after the members join,
			// the first instance still owns them all and hands them over.
			if len(info.Owned) < sites/(2*len(ps)) {
				return nil, false
			}
			for _, s := range info.Owned {
				if _, dup := owner[s]; dup {
					// The members are asked one after the other, so a
					// site handed over between two answers shows in
					// both: not settled yet. That no site is probed by
					// two instances at once is what the probe counts
					// below prove, over rounds, not two reads apart.
					return nil, false
				}
				owner[s] = info.ID
			}
		}
		return owner, len(owner) == sites
	}
	waitFor(t, "three shards covering 300 sites", 30*time.Second, func() bool { _, ok := shares(procs); return ok })
	perInstance := map[string]int{}
	owner, _ := shares(procs)
	for _, id := range owner {
		perInstance[id]++
	}
	t.Logf("shares: %v", perInstance)

	// Every site probed, and by one instance only. The window lasts until
	// every site got a probe on both origins (an event: a site no instance
	// probes ends in the hang guard) and each instance ran at least
	// minRounds rounds; then a site has 2 origins x about R probes (R the
	// most rounds an instance ran), never twice that. Rounds, not seconds:
	// a loaded machine runs fewer, and a round whose source failed (a
	// plugin killed for its deadline, restarting) probes nothing.
	const minRounds = 5
	hosts := make([]string, sites)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("s%03d.example.com", i)
	}
	check := func(what string, ps []*agentProc) {
		origin.reset()
		r0 := make([]float64, len(ps))
		for i, p := range ps {
			r0[i] = p.metric(t, "vigil_rounds_total")
		}
		// The round running at the reset ends first; every round after it
		// starts after the reset and ends before the count is taken.
		waitFor(t, fmt.Sprintf("%s: every site probed on both origins, and %d rounds of every instance", what, minRounds+1), 60*time.Second, func() bool {
			for i, p := range ps {
				if p.metric(t, "vigil_rounds_total") < r0[i]+minRounds+1 {
					return false
				}
			}
			return origin.allAtLeast(hosts, 2)
		})
		counts := origin.reset()
		rounds := 0.0
		for i, p := range ps {
			rounds = max(rounds, p.metric(t, "vigil_rounds_total")-r0[i])
		}
		for _, host := range hosts {
			if n := counts[host]; n < 2 || float64(n) > 2*(rounds+2) {
				t.Errorf("%s: site %s probed %d times in a window of %v rounds at most (2 origins each)", what, host, n, rounds)
			}
		}
	}
	check("three instances", procs)

	// Kill one: its sites move to the other two.
	killed := time.Now()
	if err := procs[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two shards covering 300 sites", 30*time.Second, func() bool { _, ok := shares(procs[:2]); return ok })
	t.Logf("sites of the killed instance re-owned after %s", time.Since(killed).Round(time.Millisecond))
	check("after a kill", procs[:2])
}

// TestEtcdUnreachable: with etcd paused, the leader stops acting within
// lease_ttl and says so in its log and status; it leads again once etcd
// is back.
func TestEtcdUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	srv := etcdtest.Start(t)
	origin := &hostCounter{n: map[string]int{}}
	h := httptest.NewServer(origin)
	t.Cleanup(h.Close)
	body := fmt.Sprintf("site \"www\" {\n  hostname = \"www.example.com\"\n  origin \"a\" { address = %q }\n  origin \"b\" { address = %q }\n}\n", h.URL, h.URL)
	p := startMember(t, "solo", srv.Endpoint, "active-standby", body)
	waitFor(t, "leadership", 20*time.Second, func() bool { info, _ := p.cluster(t); return info.Role == ha.RoleLeader })
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	waitFor(t, "the leader to stop acting", 3*haLeaseTTL, func() bool {
		info, ok := p.cluster(t)
		return ok && !info.Acting && strings.HasPrefix(info.Etcd, "unreachable")
	})
	t.Logf("stopped acting %s after etcd was paused", time.Since(paused).Round(time.Millisecond))
	// The status answers from the lease's age; the log line comes with the
	// next lease check.
	waitFor(t, "the log to say the leader stopped acting", 3*haLeaseTTL, func() bool {
		return strings.Contains(p.logText(), "stops acting")
	})
	// No probe while not acting: it does not act on state it cannot save.
	origin.reset()
	time.Sleep(5 * haRound) // a measurement window
	if n := origin.reset()["www.example.com"]; n != 0 {
		t.Fatalf("%d probes while etcd was unreachable; want none", n)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leadership again", 30*time.Second, func() bool { info, _ := p.cluster(t); return info.Role == ha.RoleLeader })
}

// TestShardScaling measures (VIGIL_HA_MEASURE=1) probe rounds and sites
// probed per second with 1, 2 and 3 sharded instances on this machine,
// for docs/ha.md. Rounds are back to back (round_interval 1ms).
func TestShardScaling(t *testing.T) {
	if os.Getenv("VIGIL_HA_MEASURE") == "" {
		t.Skip("a measurement, not a test: set VIGIL_HA_MEASURE=1")
	}
	origin := &hostCounter{n: map[string]int{}}
	h := httptest.NewServer(origin)
	t.Cleanup(h.Close)
	const sites = 3000
	var b strings.Builder
	b.WriteString("\n")
	for i := range sites {
		fmt.Fprintf(&b, "site \"s%04d\" {\n  hostname = \"s%04d.example.com\"\n  origin \"a\" { address = %q }\n  origin \"b\" { address = %q }\n}\n", i, i, h.URL, h.URL)
	}
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprintf("%d", n), func(t *testing.T) {
			srv := etcdtest.Start(t) // etcd at its defaults: --max-txn-ops 128
			var procs []*agentProc
			for i := range n {
				procs = append(procs, startMemberEvery(t, fmt.Sprintf("m%d", i), srv.Endpoint, "sharded", time.Millisecond, b.String()))
			}
			waitFor(t, "shards covering every site", 60*time.Second, func() bool {
				total := 0
				for _, p := range procs {
					info, ok := p.cluster(t)
					if !ok || len(info.Members) != n {
						return false
					}
					total += info.OwnedSites
				}
				return total == sites
			})
			metric := func(name string) float64 {
				sum := 0.0
				for _, p := range procs {
					resp, err := http.Get(p.api + "/metrics")
					if err != nil {
						t.Fatal(err)
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					for _, line := range strings.Split(string(raw), "\n") {
						if v, ok := strings.CutPrefix(line, name+" "); ok {
							var f float64
							fmt.Sscan(v, &f)
							sum += f
						}
					}
				}
				return sum
			}
			r0, s0, t0 := metric("vigil_rounds_total"), metric("vigil_sites_probed_total"), time.Now()
			time.Sleep(10 * time.Second) // the measurement window
			r1, s1, el := metric("vigil_rounds_total"), metric("vigil_sites_probed_total"), time.Since(t0).Seconds()
			t.Logf("%d instance(s), %d sites: %.1f rounds/s (all instances), %.0f sites probed/s, %.2f s to probe every site once",
				n, sites, (r1-r0)/el, (s1-s0)/el, float64(sites)/((s1-s0)/el))
		})
	}
}
