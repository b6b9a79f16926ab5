package dns

// vigil as the hidden primary of real secondaries: Knot DNS and NSD from
// Debian, on loopback, transferring with TSIG and told by NOTIFY.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// needDaemon returns the path of an installed server binary, and skips
// the test when it is missing (fails, with CI set: make deps installs it).
func needDaemon(t testing.TB, name, pkg string) string {
	t.Helper()
	bin := findDaemon(name, "/usr/sbin", "/usr/local/sbin")
	if bin == "" {
		msg := fmt.Sprintf("%s is not installed (Debian package %s; make deps installs it)", name, pkg)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// loopbackPort returns a 127.0.0.1 port free on UDP and TCP just now.
func loopbackPort(t testing.TB) int {
	t.Helper()
	for range 16 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		pc.Close()
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no loopback port free on both UDP and TCP")
	return 0
}

// secondary is a real secondary server run for a test.
type secondary struct {
	name, addr string
	logs       []string // files to show when it misbehaves
}

// showLogs returns the secondary's log files, for a failure message.
func (s *secondary) showLogs() string {
	var b strings.Builder
	for _, p := range s.logs {
		l, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "%s:\n%s\n", p, l)
	}
	return b.String()
}

// runSecondary starts cmd with its output in dir/NAME.out and stops it
// when the test ends.
func runSecondary(t testing.TB, name string, cmd *exec.Cmd, dir, addr string, logs ...string) *secondary {
	t.Helper()
	outPath := filepath.Join(dir, name+".out")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); out.Close() })
	return &secondary{name: name, addr: addr, logs: append([]string{outPath}, logs...)}
}

// startKnotSecondary runs knotd as a secondary of primary for the zone,
// transferring with the test TSIG key and taking NOTIFY from loopback
// signed with it. Its journal and timers live in a temporary directory.
func startKnotSecondary(t testing.TB, primary, listen, secret string) *secondary {
	bin := needDaemon(t, "knotd", "knot")
	dir := t.TempDir()
	host, pport, _ := net.SplitHostPort(primary)
	lhost, lport, _ := net.SplitHostPort(listen)
	conf := fmt.Sprintf(`server:
    rundir: "%[1]s"
    pidfile: "%[1]s/knot.pid"
    listen: %[8]s@%[2]s
control:
    listen: "%[1]s/knot.sock"
database:
    storage: "%[1]s"
log:
  - target: stderr
    any: info
key:
  - id: %[3]s
    algorithm: hmac-sha256
    secret: %[4]s
remote:
  - id: vigil
    address: %[5]s@%[6]s
    key: %[3]s
acl:
  - id: vigil-notify
    address: 127.0.0.1
    key: %[3]s
    action: notify
template:
  - id: default
    storage: "%[1]s"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: changes
    semantic-checks: off
zone:
  - domain: %[7]s
    master: vigil
    acl: vigil-notify
`, dir, lport, xfrKey, secret, host, pport, zone, lhost)
	cfg := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return runSecondary(t, "knot", exec.Command(bin, "-c", cfg), dir, listen)
}

// startNSDSecondary runs nsd as a secondary of primary for the zone, as
// startKnotSecondary does.
func startNSDSecondary(t testing.TB, primary, listen, secret string) *secondary {
	bin := needDaemon(t, "nsd", "nsd")
	dir := t.TempDir()
	host, pport, _ := net.SplitHostPort(primary)
	lhost, lport, _ := net.SplitHostPort(listen)
	conf := fmt.Sprintf(`server:
    ip-address: %[8]s@%[2]s
    port: %[2]s
    username: ""
    chroot: ""
    zonesdir: "%[1]s"
    database: ""
    zonelistfile: "%[1]s/zone.list"
    xfrdfile: "%[1]s/xfrd.state"
    xfrdir: "%[1]s"
    pidfile: "%[1]s/nsd.pid"
    logfile: "%[1]s/nsd.log"
    verbosity: 2
remote-control:
    control-enable: no
key:
    name: %[3]s
    algorithm: hmac-sha256
    secret: "%[4]s"
zone:
    name: %[7]s
    zonefile: "%[1]s/zone"
    request-xfr: %[5]s@%[6]s %[3]s
    allow-notify: 127.0.0.1 %[3]s
`, dir, lport, xfrKey, secret, host, pport, zone, lhost)
	cfg := filepath.Join(dir, "nsd.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return runSecondary(t, "nsd", exec.Command(bin, "-d", "-c", cfg), dir, listen, filepath.Join(dir, "nsd.log"))
}

// awaitA polls sec until name's A records are want (sorted), and returns
// how long that took. The deadline only catches a hang.
func awaitA(t testing.TB, sec *secondary, name string, want []string) time.Duration {
	t.Helper()
	begin := time.Now()
	c := &dns.Client{Timeout: time.Second}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	var last string
	for deadline := begin.Add(90 * time.Second); ; {
		r, _, err := c.Exchange(m, sec.addr)
		if err == nil {
			got := rdata(r.Answer)
			if strings.Join(got, ",") == strings.Join(want, ",") {
				return time.Since(begin)
			}
			last = fmt.Sprintf("%s %v", dns.RcodeToString[r.Rcode], got)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %s A %v (last: %s)\n%s", sec.name, name, want, last, sec.showLogs())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failover is the test zone at version with www on level 1 (203.0.113.10)
// or, failed over, on level 2 (198.51.100.20).
func failover(version uint64, failed bool) *publication.Snapshot {
	s := site("www.cdn.example.net", orig("a", "https://203.0.113.10", "healthy"))
	if failed {
		s.Level = 2
		s.Origins = []publication.Origin{orig("b", "https://198.51.100.20", "healthy")}
	}
	return &publication.Snapshot{Version: version, Sites: []publication.Site{s, site("static.cdn.example.net", orig("c", "https://203.0.113.30", "healthy"))}}
}

// TestSecondaries runs vigil as the hidden primary of a Knot and an NSD
// secondary (each skipped when not installed) and fails a site over and
// back: each secondary, told by NOTIFY, transfers the change (IXFR) and
// answers the new records. The time from the publication to the
// secondary's new answer is logged; BenchmarkPropagation measures it.
func TestSecondaries(t *testing.T) {
	starts := map[string]func(testing.TB, string, string, string) *secondary{
		"knot": startKnotSecondary, "nsd": startNSDSecondary,
	}
	for _, name := range []string{"knot", "nsd"} {
		t.Run(name, func(t *testing.T) {
			hub := publish.NewHub()
			hub.Publish(failover(1, false))
			port := loopbackPort(t)
			cfg := primaryConfig(t, fmt.Sprintf("127.0.0.1:%d", port))
			s, logs := startPrimary(t, cfg, hub)
			sec := starts[name](t, s.Addr(), fmt.Sprintf("127.0.0.1:%d", port), xfrSecret)
			awaitA(t, sec, "www.cdn.example.net.", []string{"A 203.0.113.10"})

			for _, step := range []struct {
				version uint64
				failed  bool
				want    string
			}{{2, true, "A 198.51.100.20"}, {3, false, "A 203.0.113.10"}} {
				hub.Publish(failover(step.version, step.failed))
				took := awaitA(t, sec, "www.cdn.example.net.", []string{step.want})
				t.Logf("%s: publication %d answered by the secondary %v after it was published", name, step.version, took.Round(time.Millisecond))
				if r := exchange(t, sec.addr, q{name: zone, qtype: dns.TypeSOA}); len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != uint32(step.version) {
					t.Errorf("%s SOA after publication %d: %v", name, step.version, r.Answer)
				}
			}
			if st := s.Stats(); st.NotifySent < 2 || st.TransfersServed < 2 || st.TransfersRefused != 0 {
				t.Errorf("primary stats: %d NOTIFY sent, %d transfers served, %d refused; want NOTIFY and transfers for every change", st.NotifySent, st.TransfersServed, st.TransfersRefused)
			}
			if !strings.Contains(logs.String(), "type=IXFR") {
				t.Errorf("%s never transferred incrementally:\n%s", name, logs.String())
			}
			if got := exchange(t, sec.addr, q{name: "static.cdn.example.net.", qtype: dns.TypeA}); strings.Join(rdata(got.Answer), ",") != "A 203.0.113.30" {
				t.Errorf("%s lost the unchanged site: %v", name, got.Answer)
			}
		})
	}
}

// TestSecondaryWrongKey: a secondary with another secret for the key
// gets no zone, and vigil's log names the key and the client.
func TestSecondaryWrongKey(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(failover(1, false))
	port := loopbackPort(t)
	s, logs := startPrimary(t, primaryConfig(t), hub)
	sec := startKnotSecondary(t, s.Addr(), fmt.Sprintf("127.0.0.1:%d", port), "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0xMjM0NTY=")
	for deadline := time.Now().Add(90 * time.Second); s.Stats().TransfersRefused == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the wrong key was never refused:\n%s\n%s", logs.String(), sec.showLogs())
		}
	}
	if l := logs.String(); !strings.Contains(l, "TSIG") || !strings.Contains(l, xfrKey) {
		t.Errorf("the refusal does not name the key:\n%s", l)
	}
	if r := exchange(t, sec.addr, q{name: "www.cdn.example.net.", qtype: dns.TypeA}); len(r.Answer) != 0 {
		t.Errorf("a secondary with the wrong key answers %v", r.Answer)
	}
	if st := s.Stats(); st.TransfersServed != 0 {
		t.Errorf("%d transfers served to a wrong key", st.TransfersServed)
	}
}

// BenchmarkPropagation measures the time from a publication that fails a
// site over (or back) to the moment a Knot secondary of vigil answers the
// new record: NOTIFY, the secondary's SOA query, IXFR, and its reload.
// It reports ms/propagation.
func BenchmarkPropagation(b *testing.B) {
	for _, name := range []string{"knot", "nsd"} {
		b.Run(name, func(b *testing.B) {
			starts := map[string]func(testing.TB, string, string, string) *secondary{"knot": startKnotSecondary, "nsd": startNSDSecondary}
			hub := publish.NewHub()
			hub.Publish(failover(1, false))
			port := loopbackPort(b)
			s, _ := startPrimary(b, primaryConfig(b, fmt.Sprintf("127.0.0.1:%d", port)), hub)
			sec := starts[name](b, s.Addr(), fmt.Sprintf("127.0.0.1:%d", port), xfrSecret)
			awaitA(b, sec, "www.cdn.example.net.", []string{"A 203.0.113.10"})
			var total time.Duration
			b.ResetTimer()
			for i := range b.N {
				failed := i%2 == 0
				want := "A 203.0.113.10"
				if failed {
					want = "A 198.51.100.20"
				}
				hub.Publish(failover(uint64(i+2), failed))
				total += awaitA(b, sec, "www.cdn.example.net.", []string{want})
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/propagation")
		})
	}
}
