package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	"github.com/vigilcdn/vigil/internal/testnet"
)

// scaleResult is what BenchmarkScale measured at one fleet size.
type scaleResult struct {
	sites                 int
	firstStart, cached    time.Duration // process start to "vigil agent started"
	rssPeak, rssAfter     int64         // bytes: the most during rounds, and after the last
	apiGrowth             int64         // RSS growth over three full GET /v1/sites
	boltBytes, cacheBytes int64
	roundSeconds          float64 // mean round duration (probes included)
	sitesBody             int64
}

var scaleBase *scaleResult // the 1,000-site figures, for the ratios

// BenchmarkScale runs the real agent with the real direct plugin over a
// fleet of 2-origin sites against a loopback origin, with the default
// sites_per_round (500) and with every site probed each round, and reports
// per site: resident memory (the most seen while rounds
// run, and after them), start-up (a first start that parses the
// configuration, and a restart from the cached configuration with the
// state loaded and the plugin started), the growth of resident memory
// over three full GET /v1/sites, and the state file's size; then each as a
// ratio to the 1,000-site case. Each size runs once whatever b.N is: it
// takes from seconds (1,000) to minutes (100,000).
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, perRound := range []int{500, n} {
			if perRound > n || (perRound == 500 && n == 1000) {
				continue
			}
			mode := "per_round=all"
			if perRound < n {
				mode = fmt.Sprintf("per_round=%d", perRound)
			}
			b.Run(fmt.Sprintf("sites=%d/%s", n, mode), func(b *testing.B) {
				benchScale(b, n, perRound)
			})
		}
	}
}

func benchScale(b *testing.B, n, perRound int) {
	var r *scaleResult
	for range b.N {
		r = measureScale(b, n, perRound)
	}
	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(r.rssPeak), "rss_peak_B/site")
	b.ReportMetric(per(r.rssAfter), "rss_after_B/site")
	b.ReportMetric(r.firstStart.Seconds(), "first_start_s")
	b.ReportMetric(r.cached.Seconds(), "start_s")
	b.ReportMetric(per(r.apiGrowth), "api_rss_growth_B/site")
	b.ReportMetric(per(r.boltBytes), "state_file_B/site")
	b.ReportMetric(r.roundSeconds, "round_s")
	if n == 1000 {
		scaleBase = r
		return
	}
	if base := scaleBase; base != nil {
		b.ReportMetric(per(r.rssAfter)/(float64(base.rssAfter)/float64(base.sites)), "rss_per_site_vs_1k")
		b.ReportMetric(r.cached.Seconds()/base.cached.Seconds(), "start_vs_1k")
		b.ReportMetric(per(r.boltBytes)/(float64(base.boltBytes)/float64(base.sites)), "state_per_site_vs_1k")
	}
}

func measureScale(b *testing.B, n, perRound int) *scaleResult {
	b.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer origin.Close()
	dir := b.TempDir()
	listen := testnet.Addr(b)
	round := max(2*time.Second, time.Duration(perRound/5000)*time.Second) // room for the round's probes
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `control {
  round_interval  = %q
  sites_per_round = %d
  data_dir        = %q
  plugin_dir      = %q
  api { listen = %q }
}
source "direct" { plugin = "vigil-source-direct" }
`, round.String(), perRound, filepath.Join(dir, "data"), binDir, listen)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&cfg, "site \"s%06d\" {\n  hostname = \"s%06d.example.com\"\n  origin \"a\" { address = %q }\n  origin \"b\" {\n    address = %q\n    level = 2\n  }\n}\n", i, i, origin.URL, origin.URL)
	}
	config := filepath.Join(dir, "vigil.hcl")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	res := &scaleResult{sites: n}
	api := "http://" + listen

	// The first start parses the configuration; wait for one round, so the
	// state is saved.
	p, took := startTimed(b, config)
	res.firstStart = took
	waitRounds(b, api, 1, 10*round+time.Minute)
	p.stop(b)

	// The restart: cached configuration, stored state, plugin started.
	p, res.cached = startTimed(b, config)
	defer p.stop(b)
	var mu sync.Mutex
	peak := int64(0)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if r := rss(p.cmd.Process.Pid); r > 0 {
					mu.Lock()
					peak = max(peak, r)
					mu.Unlock()
				}
			}
		}
	}()
	waitRounds(b, api, 3, 10*round+time.Minute)
	close(stop)
	<-sampled
	res.rssPeak = peak
	res.rssAfter = rss(p.cmd.Process.Pid)
	res.roundSeconds = metricValue(b, api, "vigil_round_duration_seconds_sum") / metricValue(b, api, "vigil_round_duration_seconds_count")
	before := rss(p.cmd.Process.Pid)
	for range 3 {
		resp, err := http.Get(api + "/v1/sites")
		if err != nil {
			b.Fatal(err)
		}
		res.sitesBody, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	res.apiGrowth = max(0, rss(p.cmd.Process.Pid)-before)
	if fi, err := os.Stat(filepath.Join(dir, "data", "vigil.db")); err == nil {
		res.boltBytes = fi.Size()
	}
	if fi, err := os.Stat(filepath.Join(dir, "data", "config.cache")); err == nil {
		res.cacheBytes = fi.Size()
	}
	b.Logf("%d sites, %d a round: first start %v, start %v, RSS peak %d MiB, after rounds %d MiB, +%d MiB over 3 GET /v1/sites (%d MiB each), state file %d MiB, config cache %d MiB, round %.2fs",
		n, perRound, res.firstStart.Round(time.Millisecond), res.cached.Round(time.Millisecond), res.rssPeak>>20, res.rssAfter>>20,
		res.apiGrowth>>20, res.sitesBody>>20, res.boltBytes>>20, res.cacheBytes>>20, res.roundSeconds)
	return res
}

// scaleProc is an agent started by startTimed.
type scaleProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *scaleProc) stop(b *testing.B) {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// startTimed starts the agent and times it from exec to "vigil agent
// started".
func startTimed(b *testing.B, config string) (*scaleProc, time.Duration) {
	b.Helper()
	cmd := exec.Command(filepath.Join(binDir, "vigil"), "agent", "-config", config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &scaleProc{cmd: cmd, done: make(chan struct{})}
	started := make(chan time.Duration, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "vigil agent started") {
				started <- time.Since(start)
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case d := <-started:
		return p, d
	case <-p.done:
		b.Fatal("the agent exited before it started")
	case <-time.After(5 * time.Minute):
		p.stop(b)
		b.Fatal("the agent did not start in 5 minutes")
	}
	return nil, 0
}

func waitRounds(b *testing.B, api string, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for metricValue(b, api, "vigil_rounds_total") < float64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("fewer than %d rounds in %v", n, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func metricValue(b *testing.B, api, name string) float64 {
	b.Helper()
	// The agent group only: a full page makes every site's series at each
	// poll, which at tens of thousands of sites would weigh on what is measured.
	resp, err := http.Get(api + "/metrics?collect[]=agent")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// rss is a process's resident memory in bytes (0 when unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is the CPU time (user + system) of pid and of its children
// still running (the agent's plugins), from /proc.
func procCPU(pid int) time.Duration {
	ticks := func(p string) (int64, int) {
		b, err := os.ReadFile(filepath.Join("/proc", p, "stat"))
		if err != nil {
			return 0, 0
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // state is field 3
		if len(f) < 13 {
			return 0, 0
		}
		ppid, _ := strconv.Atoi(f[1])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return u + st, ppid
	}
	total, _ := ticks(strconv.Itoa(pid))
	if dirs, err := os.ReadDir("/proc"); err == nil {
		for _, d := range dirs {
			if _, err := strconv.Atoi(d.Name()); err != nil {
				continue
			}
			if t, ppid := ticks(d.Name()); ppid == pid {
				total += t
			}
		}
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
}

// loadAvg is the 1-minute load average ("?" when unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// etcdMetric is the sum of the samples of name (any labels) on an etcd
// member's /metrics.
func etcdMetric(t *testing.T, endpoint, name string) float64 {
	t.Helper()
	resp, err := http.Get(endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// TestShardedScale measures (VIGIL_HA_MEASURE=1; VIGIL_HA_SITES sites,
// 30,000 unless set) three sharded agents with the real direct plugin on
// a 3-member etcd at its defaults, all on loopback on this machine, for
// docs/ha.md and docs/sizing.md: the cold start (to the first probe on
// every agent, and to every site owned at its rendezvous share), whether
// every site is probed each cycle (sites_per_round covers a share, so a
// cycle is a round), etcd's write rate from etcd's own metrics, each
// agent's RSS and CPU per round, and the takeover of a SIGKILLed agent's
// share. Every figure is logged with the load average; nothing here is a
// wall-clock assertion (the waits only catch a hang).
func TestShardedScale(t *testing.T) {
	if os.Getenv("VIGIL_HA_MEASURE") == "" {
		t.Skip("a measurement, not a test: set VIGIL_HA_MEASURE=1 (and VIGIL_HA_SITES)")
	}
	n := 30000
	if v, err := strconv.Atoi(os.Getenv("VIGIL_HA_SITES")); err == nil && v > 0 {
		n = v
	}
	const lease = 10 * time.Second
	round := 30 * time.Second
	if v, err := time.ParseDuration(os.Getenv("VIGIL_HA_ROUND")); err == nil {
		round = v
	}
	etcd := etcdtest.StartCluster(t, 3)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(origin.Close)
	var sites strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sites, "site \"s%06d\" {\n  hostname = \"s%06d.example.com\"\n  origin \"a\" { address = %q }\n  origin \"b\" {\n    address = %q\n    level = 2\n  }\n}\n", i, i, origin.URL, origin.URL)
	}
	var eps []string
	for _, e := range etcd.Endpoints() {
		eps = append(eps, strconv.Quote(e))
	}
	ids := []string{"cp-a", "cp-b", "cp-c"}
	var paths []string
	for _, id := range ids {
		dir := t.TempDir()
		cfg := fmt.Sprintf(`control {
  round_interval  = %q
  sites_per_round = %d
  data_dir        = %q
  plugin_dir      = %q
  api {
    listen    = %q
    token_env = "VIGIL_TOKEN"
  }
  store "etcd" {
    endpoints = [%s]
    prefix    = "/vigil-scale"
    lease_ttl = %q
    mode      = "sharded"
    id        = %q
  }
}
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = %q
}
`, round.String(), n, filepath.Join(dir, "data"), binDir, testnet.Addr(t), strings.Join(eps, ", "), lease.String(), id, (round*2/3).String()) + sites.String()
		path := filepath.Join(dir, "vigil.hcl")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	t.Logf("%d sites, 3 agents, 3-member etcd, lease_ttl %s, round_interval %s, sites_per_round %d; load average %s", n, lease, round, n, loadAvg())

	// Cold start: the three at once.
	launched := time.Now()
	procs := make([]*agentProc, 3)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			procs[i] = startAgentArgs(t, filepath.Join(binDir, "vigil"), paths[i], []string{"-log-level", "info"})
		})
	}
	wg.Wait()
	t.Logf("figure: the three APIs listen %s after launch (configuration parsed; load %s)", time.Since(launched).Round(time.Millisecond), loadAvg())
	guard := hangGuard(10 * time.Minute)
	var firstProbe, owned, atShares time.Duration
	waitFor(t, "every site owned at its rendezvous share, each agent probing", guard, func() bool {
		probing, total := 0, 0
		for _, p := range procs {
			info, ok := p.cluster(t)
			if !ok {
				return false
			}
			if p.metric(t, "vigil_sites_probed_total") > 0 {
				probing++
			}
			if len(info.Members) == 3 {
				total += info.OwnedSites
			}
		}
		if probing == 3 && firstProbe == 0 {
			firstProbe = time.Since(launched)
		}
		if total == n && owned == 0 {
			owned = time.Since(launched)
		}
		if total == n && probing == 3 {
			atShares = time.Since(launched)
			return true
		}
		return false
	})
	shares := make([]int, 3)
	for i, p := range procs {
		info, _ := p.cluster(t)
		shares[i] = info.OwnedSites
	}
	t.Logf("figure: cold start: every site owned at the rendezvous shares %s after launch, every agent probing %s after launch (its first round with sites), both %s; shares %v (rendezvous ~%d each); load %s",
		owned.Round(time.Millisecond), firstProbe.Round(time.Millisecond), atShares.Round(time.Millisecond), shares, n/3, loadAvg())

	// Steady rounds: two full rounds on every agent, measured between.
	rounds := func(p *agentProc) float64 { return p.metric(t, "vigil_rounds_total") }
	type sample struct {
		rounds, probed float64
		cpu            time.Duration
	}
	take := func() ([]sample, map[string]float64, time.Time) {
		s := make([]sample, 3)
		for i, p := range procs {
			s[i] = sample{rounds(p), p.metric(t, "vigil_sites_probed_total"), procCPU(p.cmd.Process.Pid)}
		}
		em := map[string]float64{}
		for _, name := range []string{"etcd_mvcc_put_total", "etcd_mvcc_delete_total", "etcd_mvcc_txn_total", "etcd_server_proposals_committed_total", "etcd_network_client_grpc_received_bytes_total", "etcd_disk_wal_fsync_duration_seconds_count"} {
			em[name] = etcdMetric(t, etcd.Members[0].Endpoint, name)
		}
		return s, em, time.Now()
	}
	// Let a round begin after the shares settled.
	s0r := make([]float64, 3)
	for i, p := range procs {
		s0r[i] = rounds(p)
	}
	// Three rounds: the first probes the sites, the second makes them
	// healthy (healthy_threshold 2), so the window holds quiet rounds.
	waitFor(t, "three rounds on every agent after the shares settled", guard, func() bool {
		for i, p := range procs {
			if rounds(p) < s0r[i]+3 {
				return false
			}
		}
		return true
	})
	s0, e0, t0 := take()
	peak := make([]int64, 3)
	waitFor(t, "two more rounds on every agent", guard, func() bool {
		done := true
		for i, p := range procs {
			peak[i] = max(peak[i], rss(p.cmd.Process.Pid))
			if rounds(p) < s0[i].rounds+2 {
				done = false
			}
		}
		return done
	})
	s1, e1, t1 := take()
	el := t1.Sub(t0).Seconds()
	for i, p := range procs {
		info, _ := p.cluster(t)
		r := s1[i].rounds - s0[i].rounds
		probed := s1[i].probed - s0[i].probed
		t.Logf("figure: %s owns %d: %.0f rounds, %.0f sites probed (%.2f cycles of its share), %.2f s CPU a round (agent + plugin), RSS %d MiB (peak %d MiB), round %.2f s; load %s",
			ids[i], info.OwnedSites, r, probed, probed/float64(info.OwnedSites), (s1[i].cpu-s0[i].cpu).Seconds()/r,
			rss(p.cmd.Process.Pid)>>20, peak[i]>>20, p.metric(t, "vigil_round_duration_seconds_sum")/p.metric(t, "vigil_round_duration_seconds_count"), loadAvg())
		if probed < float64(info.OwnedSites) {
			t.Errorf("%s probed %.0f sites in %.0f rounds; its share is %d: not every site was probed each cycle", ids[i], probed, r, info.OwnedSites)
		}
	}
	for name, v := range e1 {
		t.Logf("figure: etcd %s: %.1f a second over %.0f s", name, (v-e0[name])/el, el)
	}

	// Takeover: SIGKILL cp-b; its lease expires, the others claim its share.
	info, _ := procs[1].cluster(t)
	lost := info.OwnedSites
	logFrom := []int{len(procs[0].logText()), len(procs[2].logText())}
	killed := time.Now()
	if err := procs[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	live := []*agentProc{procs[0], procs[2]}
	waitFor(t, "the two others owning every site", guard, func() bool {
		total := 0
		for _, p := range live {
			info, ok := p.cluster(t)
			if !ok || len(info.Members) != 2 {
				return false
			}
			total += info.OwnedSites
		}
		return total == n
	})
	ownedAgain := time.Since(killed)
	t.Logf("figure: takeover: cp-b's %d sites owned again %s after its SIGKILL (lease_ttl %s); load %s", lost, ownedAgain.Round(time.Millisecond), lease, loadAvg())

	// Their first probe: the claimed sites the survivors' rounds probed,
	// as their logs count them (takeover rounds, engine/claim.go, and
	// rounds that took claimed sites in as they started), or else a
	// round of each that began after the claims (two more rounds).
	r0 := []float64{rounds(live[0]), rounds(live[1])}
	var how string
	waitFor(t, "cp-b's sites probed by the survivors", guard, func() bool {
		early := 0
		for i, p := range live {
			early += takeoverSites(p.logText()[logFrom[i]:])
		}
		if early >= lost {
			how = fmt.Sprintf("as the survivors' logs count them (%d claimed sites probed)", early)
			return true
		}
		for i, p := range live {
			if rounds(p) < r0[i]+2 {
				return false
			}
		}
		how = fmt.Sprintf("at the latest: two rounds of each survivor since (their logs count %d claimed sites probed)", early)
		return true
	})
	t.Logf("figure: takeover: cp-b's %d sites probed again %s after its SIGKILL, %s (lease_ttl %s, round_interval %s); load %s",
		lost, time.Since(killed).Round(time.Millisecond), how, lease, round, loadAvg())
}

// takeoverSites sums the claimed sites that an agent's log says its
// rounds probed: takeover rounds, and rounds that took claimed sites in
// as they started (text or JSON log).
func takeoverSites(log string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "takeover round done") && !strings.Contains(line, "round probed sites claimed") {
			continue
		}
		for _, key := range []string{"claimed=", `"claimed":`} {
			if _, rest, ok := strings.Cut(line, key); ok {
				end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
				if end < 0 {
					end = len(rest)
				}
				v, _ := strconv.Atoi(rest[:end])
				n += v
				break
			}
		}
	}
	return n
}
