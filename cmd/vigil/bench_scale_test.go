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
	resp, err := http.Get(api + "/metrics")
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
