package dns

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const (
	xfrKey    = "vigil-xfr."
	xfrSecret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMzQ=" // base64
	xfrEnv    = "VIGIL_TEST_TSIG_SECRET"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// primaryConfig is a hidden primary's configuration: transfers from
// loopback with the test key, NOTIFY to notify.
func primaryConfig(t testing.TB, notify ...string) *config.DNSPublisher {
	t.Setenv(xfrEnv, xfrSecret)
	c := newConfig(false)
	c.RName = "dns-admin.example.net."
	c.SOARefresh, c.SOARetry, c.SOAExpire = 60, 10, 86400
	c.AllowTransfer = []string{"127.0.0.1"}
	c.Notify = notify
	c.TSIGKey, c.TSIGAlgorithm, c.TSIGSecretEnv = xfrKey, "hmac-sha256", xfrEnv
	return c
}

// startPrimary runs a hidden primary following hub, logging into the
// returned buffer.
func startPrimary(t testing.TB, cfg *config.DNSPublisher, hub *publish.Hub) (*Server, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	s, err := New(cfg, hub, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// transfer asks addr for the zone (AXFR, or IXFR from serial) and returns
// the records, or the error.
func transfer(addr string, qtype uint16, serial uint32, key, secret string) ([]dns.RR, error) {
	m := new(dns.Msg)
	if qtype == dns.TypeIXFR {
		m.SetIxfr(zone, serial, "ns1.cdn.example.net.", "dns-admin.example.net.")
	} else {
		m.SetAxfr(zone)
	}
	tr := &dns.Transfer{DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second}
	if key != "" {
		tr.TsigSecret = map[string]string{key: secret}
		m.SetTsig(key, dns.HmacSHA256, 300, time.Now().Unix())
	}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, err
	}
	var rrs []dns.RR
	for env := range ch {
		if env.Error != nil {
			return rrs, env.Error
		}
		rrs = append(rrs, env.RR...)
	}
	return rrs, nil
}

func TestTransfer(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(fixture(7))
	s, logs := startPrimary(t, primaryConfig(t), hub)

	rrs, err := transfer(s.Addr(), dns.TypeAXFR, 0, xfrKey, xfrSecret)
	if err != nil {
		t.Fatalf("AXFR: %v", err)
	}
	got := rdata(rrs)
	wantSOA := "SOA ns1.cdn.example.net. dns-admin.example.net. 7 60 10 86400 30"
	for _, want := range []string{wantSOA, "A 203.0.113.10", "AAAA 2001:db8::1", "CNAME backup.example.net.", "NS ns1.cdn.example.net."} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("AXFR lacks %q; got\n%s", want, strings.Join(got, "\n"))
		}
	}
	if first, last := rrs[0], rrs[len(rrs)-1]; first.Header().Rrtype != dns.TypeSOA || last.Header().Rrtype != dns.TypeSOA {
		t.Errorf("AXFR does not begin and end with the SOA: %v ... %v", first, last)
	}
	for _, rr := range rrs {
		if strings.Contains(rr.String(), "203.0.113.12") {
			t.Errorf("AXFR holds the unhealthy origin: %v", rr)
		}
	}

	// A switch: www loses 203.0.113.10 and gains 203.0.113.13.
	next := fixture(8)
	next.Sites[0].Origins[0] = orig("a", "https://203.0.113.13", "healthy")
	hub.Publish(next)
	awaitSerial(t, s.Addr(), 8)

	inc, err := transfer(s.Addr(), dns.TypeIXFR, 7, xfrKey, xfrSecret)
	if err != nil {
		t.Fatalf("IXFR from 7: %v", err)
	}
	var texts []string
	for _, rr := range inc {
		texts = append(texts, rr.String())
	}
	// A condensed difference: SOA 8, SOA 7, deleted, SOA 8, added, SOA 8.
	if len(inc) != 6 || !strings.Contains(texts[2], "203.0.113.10") || !strings.Contains(texts[4], "203.0.113.13") ||
		inc[1].(*dns.SOA).Serial != 7 || inc[0].(*dns.SOA).Serial != 8 || inc[3].(*dns.SOA).Serial != 8 {
		t.Errorf("IXFR from 7 is not the difference:\n%s", strings.Join(texts, "\n"))
	}

	upToDate, err := transfer(s.Addr(), dns.TypeIXFR, 8, xfrKey, xfrSecret)
	if err != nil || len(upToDate) != 1 || upToDate[0].(*dns.SOA).Serial != 8 {
		t.Errorf("IXFR from the current serial: %v, %v; want the SOA alone", upToDate, err)
	}
	full, err := transfer(s.Addr(), dns.TypeIXFR, 3, xfrKey, xfrSecret)
	if err != nil || len(full) != len(rrs) {
		t.Errorf("IXFR from a serial no longer kept: %d records, %v; want the whole zone (%d)", len(full), err, len(rrs))
	}
	if st := s.Stats(); st.TransfersServed != 4 || st.TransfersRefused != 0 {
		t.Errorf("transfers served %d refused %d, want 4 and 0", st.TransfersServed, st.TransfersRefused)
	}
	if strings.Contains(logs.String(), xfrSecret) {
		t.Error("the TSIG secret is in the log")
	}
}

// awaitSerial waits until addr answers the zone's SOA with serial.
func awaitSerial(t *testing.T, addr string, serial uint32) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		r := exchange(t, addr, q{name: zone, qtype: dns.TypeSOA})
		if len(r.Answer) == 1 && r.Answer[0].(*dns.SOA).Serial == serial {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered serial %d: %v", addr, serial, r.Answer)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTransferRefused(t *testing.T) {
	hub := publish.NewHub()
	hub.Publish(fixture(7))
	s, logs := startPrimary(t, primaryConfig(t), hub)
	other := primaryConfig(t)
	other.AllowTransfer = []string{"192.0.2.0/24"}
	elsewhere, elsewhereLogs := startPrimary(t, other, hub)

	tests := []struct {
		name, addr  string
		key, secret string
		logs        *lockedBuffer
		log         string // what the log must say
	}{
		{"unsigned", s.Addr(), "", "", logs, "not signed; TSIG key vigil-xfr. is required"},
		{"wrong secret", s.Addr(), xfrKey, "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0xMjM0NTY=", logs, "TSIG key vigil-xfr.: signature does not verify"},
		{"unknown key", s.Addr(), "other-key.", xfrSecret, logs, "signed with TSIG key other-key., not vigil-xfr."},
		{"address not allowed", elsewhere.Addr(), xfrKey, xfrSecret, elsewhereLogs, "address not in allow_transfer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rrs, err := transfer(tc.addr, dns.TypeAXFR, 0, tc.key, tc.secret)
			if err == nil {
				t.Fatalf("AXFR served %d records; want a refusal", len(rrs))
			}
			if len(rrs) > 0 {
				t.Errorf("a refused AXFR sent %d records", len(rrs))
			}
			if !strings.Contains(tc.logs.String(), tc.log) {
				t.Errorf("the log does not say %q:\n%s", tc.log, tc.logs.String())
			}
		})
	}
	if st := elsewhere.Stats(); st.TransfersRefused != 1 || st.TransfersServed != 0 {
		t.Errorf("server with allow_transfer 192.0.2.0/24: refused %d served %d, want 1 and 0", st.TransfersRefused, st.TransfersServed)
	}
	// AXFR over UDP is refused: transfers go over TCP.
	if r := exchange(t, s.Addr(), q{name: zone, qtype: dns.TypeAXFR}); r.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR over UDP: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if strings.Contains(logs.String(), xfrSecret) {
		t.Error("the TSIG secret is in the log")
	}
}

func TestTSIGConfigErrors(t *testing.T) {
	t.Setenv("VIGIL_TEST_EMPTY", "")
	t.Setenv("VIGIL_TEST_NOT_BASE64", "not base64!")
	tests := []struct {
		name, env, want string
	}{
		{"unset", "VIGIL_TEST_UNSET_TSIG", "TSIG key vigil-xfr.: the environment variable VIGIL_TEST_UNSET_TSIG is empty or unset"},
		{"empty", "VIGIL_TEST_EMPTY", "the environment variable VIGIL_TEST_EMPTY is empty or unset"},
		{"not base64", "VIGIL_TEST_NOT_BASE64", "VIGIL_TEST_NOT_BASE64 does not hold base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig(false)
			c.AllowTransfer = []string{"127.0.0.1"}
			c.TSIGKey, c.TSIGSecretEnv = xfrKey, tc.env
			_, err := New(c, publish.NewHub(), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want an error saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "not base64!") {
				t.Error("the error shows the variable's value")
			}
		})
	}
}

// TestNotify checks that a changed zone is announced to the secondaries
// of notify, signed, and that an unchanged one is not.
func TestNotify(t *testing.T) {
	got := make(chan *dns.Msg, 16)
	secondary := &dns.Server{Addr: "127.0.0.1:0", Net: "udp", TsigSecret: map[string]string{xfrKey: xfrSecret}}
	started := make(chan struct{})
	secondary.NotifyStartedFunc = func() { close(started) }
	secondary.Handler = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if w.TsigStatus() != nil || r.IsTsig() == nil {
			m.Rcode = dns.RcodeNotAuth
		} else {
			m.SetTsig(xfrKey, dns.HmacSHA256, 300, time.Now().Unix())
		}
		_ = w.WriteMsg(m)
		got <- r
	})
	go func() { _ = secondary.ListenAndServe() }()
	<-started
	t.Cleanup(func() { _ = secondary.Shutdown() })
	addr := secondary.PacketConn.LocalAddr().String()

	hub := publish.NewHub()
	hub.Publish(fixture(7))
	s, _ := startPrimary(t, primaryConfig(t, addr), hub)
	want := func(serial uint32) {
		t.Helper()
		select {
		case r := <-got:
			if r.Opcode != dns.OpcodeNotify || len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != serial || r.IsTsig() == nil {
				t.Fatalf("NOTIFY %v; want opcode NOTIFY, signed, with SOA serial %d", r, serial)
			}
		case <-time.After(time.Minute):
			t.Fatalf("no NOTIFY for serial %d", serial)
		}
	}
	want(7) // at start
	// Version 8 changes nothing in the zone: no NOTIFY. Version 9 does.
	hub.Publish(fixture(8))
	awaitSerial(t, s.Addr(), 8)
	next := fixture(9)
	next.Sites[0].Origins[0] = orig("a", "https://203.0.113.13", "healthy")
	hub.Publish(next)
	want(9)
	for deadline := time.Now().Add(time.Minute); s.Stats().NotifySent != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("NotifySent %d, want 2", s.Stats().NotifySent)
		}
	}
}

func TestNotifyRefused(t *testing.T) {
	secondary := &dns.Server{Addr: "127.0.0.1:0", Net: "udp"}
	started := make(chan struct{})
	secondary.NotifyStartedFunc = func() { close(started) }
	secondary.Handler = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNotAuth)
		_ = w.WriteMsg(m)
	})
	go func() { _ = secondary.ListenAndServe() }()
	<-started
	t.Cleanup(func() { _ = secondary.Shutdown() })

	hub := publish.NewHub()
	hub.Publish(fixture(7))
	s, logs := startPrimary(t, primaryConfig(t, secondary.PacketConn.LocalAddr().String()), hub)
	for deadline := time.Now().Add(time.Minute); s.Stats().NotifyFailed == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a refused NOTIFY was never reported")
		}
	}
	if l := logs.String(); !strings.Contains(l, "NOTAUTH") || !strings.Contains(l, "TSIG key vigil-xfr.") {
		t.Errorf("the log does not name the refusal and the key:\n%s", l)
	}
	if strings.Contains(logs.String(), xfrSecret) {
		t.Error("the TSIG secret is in the log")
	}
}

// TestZoneRecordsRamp checks that a ramping site is transferred with the
// level it ramps to.
func TestZoneRecordsRamp(t *testing.T) {
	st := settings{zone: zone, ttl: 30}
	snap := &publication.Snapshot{Version: 3, Sites: []publication.Site{
		rampSite(30, []publication.Origin{orig("n", "https://203.0.113.1", "healthy")}, []publication.Origin{orig("o", "https://203.0.113.2", "healthy")}),
	}}
	tb, _ := build(st, snap)
	got := strings.Join(rdata(tb.zoneRecords()), "\n")
	if !strings.Contains(got, "203.0.113.1") || strings.Contains(got, "203.0.113.2") {
		t.Errorf("a ramping site's zone records: %s; want the level ramped to alone", got)
	}
}
