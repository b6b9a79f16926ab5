package agent_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/internal/testnet"
)

func dnsBlock(listen string, ttl int) string {
	return fmt.Sprintf(`publish "dns" {
  listen = %q
  zone   = "example.com."
  ttl    = %d
  ns     = ["ns1.example.com."]
}
`, listen, ttl)
}

// answerTTL asks addr for www.example.com's A records and returns the
// TTL of the first, or an error when nothing answers.
func answerTTL(addr string) (uint32, error) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return 0, err
	}
	if len(r.Answer) == 0 {
		return 0, fmt.Errorf("no answer: %s", dns.RcodeToString[r.Rcode])
	}
	return r.Answer[0].Header().Ttl, nil
}

// TestReloadKeepsDNSServing: a reload that moves the DNS publisher to an
// address it cannot bind leaves the old publisher serving, and says so; a
// reload on the same address applies the new settings.
func TestReloadKeepsDNSServing(t *testing.T) {
	dnsAddr := testnet.Addr(t)
	f, apiAddr := startWith(t, &fixture{dir: t.TempDir()}, dnsBlock(dnsAddr, 30))
	if ttl, err := answerTTL(dnsAddr); err != nil || ttl != 30 {
		t.Fatalf("DNS before the reloads: ttl %d, %v", ttl, err)
	}

	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	res, err := f.a.Reload(f.config(t, apiAddr, dnsBlock(taken.LocalAddr().String(), 60)))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error(), "goes on serving") {
		t.Fatalf("failed %v, want the DNS publisher named, with the old one serving", res.Failed)
	}
	if ttl, err := answerTTL(dnsAddr); err != nil || ttl != 30 {
		t.Fatalf("the old DNS publisher after a failed move: ttl %d, %v; want it serving with ttl 30", ttl, err)
	}

	res, err = f.a.Reload(f.config(t, apiAddr, dnsBlock(dnsAddr, 45)))
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("reload on the same address: %v, failed %v", err, res.Failed)
	}
	if ttl, err := answerTTL(dnsAddr); err != nil || ttl != 45 {
		t.Fatalf("DNS after the reload on its address: ttl %d, %v; want 45", ttl, err)
	}

	// Another spelling of the same port (as 0.0.0.0 would be, which a
	// test does not bind) overlaps the old one: the old server lets go
	// first.
	_, port, _ := net.SplitHostPort(dnsAddr)
	res, err = f.a.Reload(f.config(t, apiAddr, dnsBlock("localhost:"+port, 50)))
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("reload to localhost:%s: %v, failed %v", port, err, res.Failed)
	}
	if ttl, err := answerTTL(dnsAddr); err != nil || ttl != 50 {
		t.Fatalf("DNS after respelling its address: ttl %d, %v; want 50", ttl, err)
	}
}
