package dns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// zonemasterTests are the Zonemaster test cases run against vigil: all of
// the default profile's but the Address module (127.0.0.0/8 is a
// special-purpose range, an ERROR by design, and the reverse lookups need
// the real tree) and connectivity03 (AS numbers from services on the
// Internet). The DNSSEC module only finds the zone unsigned (a NOTICE), but
// it sends queries with the DO bit.
var zonemasterTests = []string{
	"Basic",
	"Connectivity/connectivity01", "Connectivity/connectivity02",
	"Consistency",
	"DNSSEC",
	"Delegation",
	"Nameserver",
	"Syntax",
	"Zone",
}

// zonemasterSetupWarnings are the WARNINGs that come from testing on
// loopback, not from vigil's answers. Every other WARNING fails the test as
// an ERROR does: Zonemaster reports answers without the AA bit, unknown
// EDNS options echoed, upward referrals and case mismatches as WARNINGs.
var zonemasterSetupWarnings = map[string]bool{
	"Z01_MNAME_HAS_LOCALHOST_ADDR": true, // the SOA MNAME's address is 127.0.0.1
}

// zonemasterEntry is one message of zonemaster-cli --json.
type zonemasterEntry struct {
	Level     string         `json:"level"`
	Module    string         `json:"module"`
	Testcase  string         `json:"testcase"`
	Tag       string         `json:"tag"`
	Args      map[string]any `json:"args"`
	Timestamp float64        `json:"timestamp"`
}

// TestZonemaster runs Zonemaster (Debian's zonemaster-cli) against vigil's
// DNS server: an undelegated test of example.com, whose two in-zone name
// servers (with ns_addresses) are two vigil servers on loopback addresses,
// on port 53 since Zonemaster queries no other. The root hints name the
// first of them, so that the lookups Zonemaster makes outside the zone (its
// parent, at the start) stay on loopback: vigil answers the zone's SOA and
// refuses the rest. No ERROR or CRITICAL may be reported, nor a WARNING
// but those of zonemasterSetupWarnings; the rest is logged. It takes about a second. It skips when zonemaster-cli is not
// installed or port 53 is taken on the loopback addresses it tries, and
// fails instead when CI is set.
func TestZonemaster(t *testing.T) {
	if testing.Short() {
		t.Skip("zonemaster takes seconds; skipped with -short")
	}
	bin, err := exec.LookPath("zonemaster-cli")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("zonemaster-cli is not installed (Debian's zonemaster-cli; make deps installs it)")
		}
		t.Skip("zonemaster-cli is not installed (make deps installs Debian's zonemaster-cli)")
	}
	addrs := freePort53(t, 2)
	const domain = "example.com."
	cfg := func(ip string) *config.DNSPublisher {
		return &config.DNSPublisher{
			Listen: net.JoinHostPort(ip, "53"),
			Zone:   domain,
			TTL:    300,
			NS:     []string{"ns1." + domain, "ns2." + domain},
			NSAddresses: map[string][]string{
				"ns1." + domain: {addrs[0]},
				"ns2." + domain: {addrs[1]},
			},
		}
	}
	hub := publish.NewHub()
	hub.Publish(&publication.Snapshot{Version: 2024060101, Sites: []publication.Site{
		site("www.example.com", orig("a", "https://192.0.2.10", "healthy"), orig("b", "https://[2001:db8::10]", "healthy")),
		site("example.com", orig("a", "https://192.0.2.11", "healthy")),
		site("img.example.com", orig("a", "https://cdn.example.net", "healthy")),
	}})
	var servers []*Server
	for _, ip := range addrs {
		servers = append(servers, start(t, cfg(ip), hub))
	}

	checkZonemaster(t, bin, domain, addrs)
	// Both servers were tested, over UDP and TCP alike (the counters do
	// not tell them apart; Connectivity02 fails without TCP answers).
	for i, s := range servers {
		var n uint64
		for _, v := range s.Stats().Queries {
			n += v
		}
		if n < 20 {
			t.Errorf("ns%d (%s) answered %d queries: Zonemaster did not test it", i+1, s.Addr(), n)
		}
	}
}

// freePort53 returns n loopback addresses on which port 53 is free on both
// UDP and TCP, 127.0.0.1 first when it is; it skips (fails, with CI set)
// when there are not n.
func freePort53(t *testing.T, n int) []string {
	var free []string
	var last error
	for _, ip := range []string{"127.0.0.1", "127.0.53.1", "127.0.53.2", "127.0.53.3", "127.0.53.4", "127.0.0.2", "127.0.0.3"} {
		addr := net.JoinHostPort(ip, "53")
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			last = err
			continue
		}
		ln, err := net.Listen("tcp", addr)
		pc.Close()
		if err != nil {
			last = err
			continue
		}
		ln.Close()
		if free = append(free, ip); len(free) == n {
			return free
		}
	}
	msg := fmt.Sprintf("port 53 is not free on %d loopback addresses (Zonemaster queries no other port): %v", n, last)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return nil
}

// checkZonemaster runs zonemaster-cli (bin) on domain, whose name servers
// ns1, ns2... are on port 53 of addrs, and fails the test on any ERROR,
// CRITICAL or WARNING but those of zonemasterSetupWarnings.
func checkZonemaster(t *testing.T, bin, domain string, addrs []string) {
	dir := t.TempDir()
	hints := filepath.Join(dir, "hints")
	if err := os.WriteFile(hints, []byte(".\t3600000\tIN\tNS\troot.invalid.\nroot.invalid.\t3600000\tIN\tA\t"+addrs[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--json", "--no-progress", "--no-ipv6", "--level", "WARNING", "--hints", hints}
	for i, ip := range addrs {
		args = append(args, "--ns", fmt.Sprintf("ns%d.%s/%s", i+1, domain, ip))
	}
	for _, tc := range zonemasterTests {
		args = append(args, "--test", tc)
	}
	args = append(args, strings.TrimSuffix(domain, "."))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "LANG=C.UTF-8")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	began := time.Now()
	out, err := cmd.Output()
	took := time.Since(began)
	if ctx.Err() != nil {
		t.Fatalf("zonemaster-cli did not finish in %v:\n%s\n%s", took, out, stderr.String())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("zonemaster-cli: %v\n%s", err, stderr.String())
	}
	var entries []zonemasterEntry
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatalf("zonemaster-cli output is not JSON (%v; exit: %v):\n%s\n%s", err, cmd.ProcessState, out, stderr.String())
	}
	t.Logf("zonemaster-cli ran %d modules and test cases in %v, %d messages of WARNING or above", len(zonemasterTests), took.Round(time.Millisecond), len(entries))
	for _, e := range entries {
		line := fmt.Sprintf("%6.2fs %s %s/%s %s %v", e.Timestamp, e.Level, e.Module, e.Testcase, e.Tag, e.Args)
		switch {
		case e.Level == "ERROR" || e.Level == "CRITICAL",
			e.Level == "WARNING" && !zonemasterSetupWarnings[e.Tag]:
			t.Error(line)
		default:
			t.Log(line)
		}
	}
}

// TestZonemasterHiddenPrimary runs Zonemaster against vigil as a hidden
// primary: the zone's two name servers are a Knot and an NSD secondary on
// port 53 of two loopback addresses, both transferring from vigil (on a
// loopback port of its own, named by no NS record) with TSIG. No ERROR,
// CRITICAL or WARNING but those of zonemasterSetupWarnings may be
// reported. It skips as TestZonemaster does, and when knotd or nsd is
// not installed (fails with CI set).
func TestZonemasterHiddenPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("zonemaster takes seconds; skipped with -short")
	}
	bin, err := exec.LookPath("zonemaster-cli")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("zonemaster-cli is not installed (Debian's zonemaster-cli; make deps installs it)")
		}
		t.Skip("zonemaster-cli is not installed (make deps installs Debian's zonemaster-cli)")
	}
	needDaemon(t, "knotd", "knot")
	needDaemon(t, "nsd", "nsd")
	addrs := freePort53(t, 2)
	const domain = zone // the secondaries' configuration names it
	cfg := primaryConfig(t, net.JoinHostPort(addrs[0], "53"), net.JoinHostPort(addrs[1], "53"))
	cfg.TTL = 300
	cfg.NS = []string{"ns1." + domain, "ns2." + domain}
	cfg.NSAddresses = map[string][]string{"ns1." + domain: {addrs[0]}, "ns2." + domain: {addrs[1]}}
	cfg.RName = "hostmaster.example.net."
	cfg.SOARefresh, cfg.SOARetry, cfg.SOAExpire = 3600, 600, 1209600
	hub := publish.NewHub()
	hub.Publish(&publication.Snapshot{Version: 2024060101, Sites: []publication.Site{
		site("www.cdn.example.net", orig("a", "https://192.0.2.10", "healthy"), orig("b", "https://[2001:db8::10]", "healthy")),
		site("img.cdn.example.net", orig("a", "https://img.example.org", "healthy")),
	}})
	primary, _ := startPrimary(t, cfg, hub)
	secs := []*secondary{
		startKnotSecondary(t, primary.Addr(), net.JoinHostPort(addrs[0], "53"), xfrSecret),
		startNSDSecondary(t, primary.Addr(), net.JoinHostPort(addrs[1], "53"), xfrSecret),
	}
	for _, sec := range secs {
		awaitA(t, sec, "www.cdn.example.net.", []string{"A 192.0.2.10"})
	}
	checkZonemaster(t, bin, domain, addrs)
}
