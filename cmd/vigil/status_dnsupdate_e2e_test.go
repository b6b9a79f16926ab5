package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/ha"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

const (
	e2eUpdKey    = "vigil-update."
	e2eUpdSecret = "dXBkYXRlLXNlY3JldC11cGRhdGUtc2VjcmV0LTEyMzQ=" // base64
)

// updPrimary is a DNS primary on loopback that takes RFC 2136 UPDATEs
// signed with the test key, checks their prerequisites as BIND does for
// what vigil sends (an RRset that must exist with these values, or must
// not exist) and answers A queries from what they wrote.
type updPrimary struct {
	addr string

	mu      sync.Mutex
	a       map[string][]*dns.A // by name
	applied int                 // updates taken
	refused []string            // why updates were refused
}

func startUpdPrimary(t *testing.T) *updPrimary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &updPrimary{addr: ln.Addr().String(), a: map[string][]*dns.A{}}
	// A hand-made record, which the first leader reads and replaces.
	rr, _ := dns.NewRR("www.example.net. 300 IN A 192.0.2.1")
	p.a["www.example.net."] = []*dns.A{rr.(*dns.A)}
	srv := &dns.Server{Listener: ln, Net: "tcp", Handler: dns.HandlerFunc(p.serve),
		TsigSecret: map[string]string{e2eUpdKey: e2eUpdSecret},
		// The default refuses every opcode but QUERY and NOTIFY.
		MsgAcceptFunc: func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return p
}

func (p *updPrimary) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	defer func() {
		if req.IsTsig() != nil && w.TsigStatus() == nil {
			m.SetTsig(e2eUpdKey, dns.HmacSHA256, 300, time.Now().Unix())
		}
		_ = w.WriteMsg(m)
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Opcode != dns.OpcodeUpdate {
		if len(req.Question) == 1 && req.Question[0].Qtype == dns.TypeA {
			for _, rr := range p.a[strings.ToLower(req.Question[0].Name)] {
				m.Answer = append(m.Answer, dns.Copy(rr))
			}
		}
		return
	}
	if req.IsTsig() == nil || w.TsigStatus() != nil {
		p.refused = append(p.refused, fmt.Sprintf("TSIG: %v", w.TsigStatus()))
		m.Rcode = dns.RcodeNotAuth
		return
	}
	// Prerequisites (RFC 2136 3.2): class IN with data, the RRset must be
	// exactly these; class NONE, no RRset of that type.
	want := map[string][]string{}
	for _, rr := range req.Answer {
		h := rr.Header()
		if h.Rrtype != dns.TypeA {
			continue
		}
		name := strings.ToLower(h.Name)
		switch h.Class {
		case dns.ClassNONE:
			if len(p.a[name]) > 0 {
				p.refused = append(p.refused, "YXRRSET "+name)
				m.Rcode = dns.RcodeYXRrset
				return
			}
		case dns.ClassINET:
			want[name] = append(want[name], rr.(*dns.A).A.String())
		}
	}
	for name, ips := range want {
		var have []string
		for _, rr := range p.a[name] {
			have = append(have, rr.A.String())
		}
		if !slices.Equal(slices.Sorted(slices.Values(have)), slices.Sorted(slices.Values(ips))) {
			p.refused = append(p.refused, fmt.Sprintf("NXRRSET %s: has %v, prerequisite %v", name, have, ips))
			m.Rcode = dns.RcodeNXRrset
			return
		}
	}
	for _, rr := range req.Ns {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		switch {
		case h.Class == dns.ClassANY && h.Rrtype == dns.TypeA:
			delete(p.a, name)
		case h.Class == dns.ClassINET && h.Rrtype == dns.TypeA:
			p.a[name] = append(p.a[name], dns.Copy(rr).(*dns.A))
		}
	}
	p.applied++
}

// records is name's A records as "ip ttl", and the updates taken.
func (p *updPrimary) records(name string) (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, rr := range p.a[name] {
		out = append(out, fmt.Sprintf("%s %d", rr.A, rr.Hdr.Ttl))
	}
	return strings.Join(out, ","), p.applied
}

func (p *updPrimary) refusals() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refused...)
}

// dnsUpdateOf is the dns_update of p's view of site www (nil for none).
func dnsUpdateOf(t *testing.T, p *agentProc) *api.DNSUpdateView {
	t.Helper()
	var v api.SiteView
	if err := siteJSON(p.api+"/v1/sites/www", &v); err != nil {
		return nil
	}
	return v.DNSUpdate
}

// TestDNSUpdateInCluster: two agents over a real etcd, in active/standby
// and in sharded mode, with publish "dns_update" to a primary on
// loopback. Only the leader (the notifier when sharded) pushes (the standby's view says standby); the leader replaces the
// hand-made record, then pushes a switch (the transition TTL); it is
// killed with SIGKILL, and the new leader reads what the primary serves
// and pushes the next change without a conflict. vigil status shows the
// state on the site's card.
func TestDNSUpdateInCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	t.Setenv("VIGIL_E2E_UPDATE_SECRET", e2eUpdSecret)
	for _, mode := range []string{"active-standby", "sharded"} {
		t.Run(mode, func(t *testing.T) { testDNSUpdateInCluster(t, mode) })
	}
}

func testDNSUpdateInCluster(t *testing.T, mode string) {
	srv := etcdtest.Start(t)
	primary := startUpdPrimary(t)
	addr := map[string]string{}
	for _, n := range []string{"a1", "b1"} {
		h := httptest.NewServer(demoorigin.New(n))
		t.Cleanup(h.Close)
		addr[n] = h.URL
	}
	body := fmt.Sprintf(`
publish "dns_update" {
  server          = %q
  zone            = "example.net."
  ttl             = 2
  transition_ttl  = 1
  tsig_key        = %q
  tsig_secret_env = "VIGIL_E2E_UPDATE_SECRET"
}
site "www" {
  hostname = "www.example.net"
  origin "a1" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
site "other" {
  hostname = "www.other.org"
  origin "c1" { address = %q }
  origin "c2" { address = %q }
}
`, primary.addr, e2eUpdKey, addr["a1"], addr["b1"], addr["a1"], addr["b1"])
	var procs []*agentProc
	for _, id := range []string{"cp-a", "cp-b"} {
		procs = append(procs, startMemberLease(t, id, srv.Endpoint, mode, time.Second, haLeaseTTL, body))
	}

	// The leader (the notifier when sharded) replaces the hand-made
	// record with level 1's address; its view says ok, the other's
	// standby.
	waitFor(t, "the leader's first update", 20*time.Second, func() bool {
		got, _ := primary.records("www.example.net.")
		return got == "127.0.0.1 2"
	})
	var leader, standby *agentProc
	var d *api.DNSUpdateView
	waitFor(t, "the leader's view to say ok", 20*time.Second, func() bool {
		for i, p := range procs {
			if d = dnsUpdateOf(t, p); d != nil && d.State == api.DNSUpdateOK {
				leader, standby = p, procs[1-i]
				return true
			}
		}
		return false
	})
	if mode == "active-standby" {
		if l := leaderOf(t, procs); l != leader {
			t.Errorf("the instance that pushes is not the leader")
		}
	}
	if d.Name != "www.example.net." || d.Failures != 0 || d.Error != "" || d.At == nil {
		t.Errorf("the leader's dns_update: %+v", d)
	}
	if d := dnsUpdateOf(t, standby); d == nil || d.State != api.DNSUpdateStandby || d.Name != "www.example.net." {
		t.Errorf("the standby's dns_update: %+v; want standby for www.example.net.", d)
	}
	// A site outside the zone has none.
	var other api.SiteView
	if err := siteJSON(leader.api+"/v1/sites/other", &other); err != nil || other.DNSUpdate != nil {
		t.Errorf("site other (outside the zone): %v, dns_update %+v; want none", err, other.DNSUpdate)
	}
	var out, errb bytes.Buffer
	if code := runStatus([]string{"-address", leader.api, "www"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "dns update: www.example.net. ok, publication v") {
		t.Errorf("vigil status www on the leader exited %d:\n%s%s\nwant a dns update ok line", code, out.String(), errb.String())
	}

	// The leader pushes a switch: level 2, so the transition TTL.
	switchLevel(t, procs, 2)
	waitFor(t, "the switch in the primary", 20*time.Second, func() bool {
		got, _ := primary.records("www.example.net.")
		return got == "127.0.0.1 1"
	})
	_, before := primary.records("www.example.net.")

	killed := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if mode == "active-standby" {
		waitFor(t, "the standby to lead", 30*time.Second, func() bool {
			info, ok := standby.cluster(t)
			return ok && info.Role == ha.RoleLeader
		})
	}
	// The new leader's first push (the same records, read back first).
	waitFor(t, "the new leader's first update", 30*time.Second, func() bool {
		_, n := primary.records("www.example.net.")
		return n > before
	})
	// A figure, not an assertion (no timed tests): docs/dns.md has it.
	t.Logf("figure: SIGKILL of the leader to the new leader's first UPDATE: %s (lease_ttl %s)",
		time.Since(killed).Round(time.Millisecond), haLeaseTTL)
	_, before = primary.records("www.example.net.")
	// The new leader pushes the next change: back to level 1, TTL 2.
	switchLevel(t, []*agentProc{standby}, 1)
	waitFor(t, "the new leader's update in the primary", 20*time.Second, func() bool {
		got, _ := primary.records("www.example.net.")
		return got == "127.0.0.1 2"
	})
	if _, after := primary.records("www.example.net."); after <= before {
		t.Errorf("the primary took %d updates before the kill and %d after; want more", before, after)
	}
	waitFor(t, "the new leader's view to say ok", 20*time.Second, func() bool {
		d = dnsUpdateOf(t, standby)
		return d != nil && d.State == api.DNSUpdateOK
	})
	if d.Failures != 0 || d.Error != "" {
		t.Errorf("the new leader's dns_update: %+v; want no failure", d)
	}
	if r := primary.refusals(); len(r) != 0 {
		t.Errorf("the primary refused updates: %v", r)
	}
}

// switchLevel switches site www to level on the first of procs that
// takes it (the leader, or the shard that owns www), retrying while none
// is ready to (a leader just elected, a site being handed over).
func switchLevel(t *testing.T, procs []*agentProc, level int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("a switch of www to level %d", level), 20*time.Second, func() bool {
		for _, p := range procs {
			req, _ := http.NewRequest("POST", p.api+"/v1/sites/www/switch", strings.NewReader(fmt.Sprintf(`{"level": %d}`, level)))
			req.Header.Set("Authorization", "Bearer e2e-token")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		return false
	})
}

// siteJSON decodes the JSON at url into v.
func siteJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
