package dns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const (
	updZone   = "example.net."
	updKey    = "vigil-update."
	updSecret = "dXBkYXRlLXNlY3JldC11cGRhdGUtc2VjcmV0LTEyMzQ=" // base64
	updEnv    = "VIGIL_TEST_UPDATE_SECRET"
)

// startBIND runs named as the primary of example.net. (dynamic: updates
// signed with the test key allowed) and of locked.net. (no updates), on a
// loopback port, its files in a temporary directory.
func startBIND(t *testing.T) *secondary { return startBINDOn(t, loopbackPort(t)) }

// startBINDOn is startBIND on a given loopback port.
func startBINDOn(t *testing.T, port int) *secondary {
	bin := needDaemon(t, "named", "bind9")
	dir := t.TempDir()
	zone := func(name string) string {
		return fmt.Sprintf(`$ORIGIN %[1]s
$TTL 300
@ IN SOA ns1.%[1]s hostmaster.%[1]s 1 3600 600 604800 30
@ IN NS ns1.%[1]s
ns1 IN A 127.0.0.1
www IN A 192.0.2.1
`, name)
	}
	for _, z := range []string{"example.net.", "locked.net."} {
		if err := os.WriteFile(filepath.Join(dir, z+"db"), []byte(zone(z)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	managed-keys-directory "%[1]s";
	listen-on port %[2]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	notify no;
	dnssec-validation no;
};
controls { };
key "%[3]s" {
	algorithm hmac-sha256;
	secret "%[4]s";
};
zone "example.net" {
	type primary;
	file "%[1]s/example.net.db";
	allow-update { key "%[3]s"; };
};
zone "locked.net" {
	type primary;
	file "%[1]s/locked.net.db";
};
`, dir, port, updKey, updSecret)
	cfg := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-g", "-4", "-c", cfg}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // stay in the temporary directory's owner
	}
	sec := runSecondary(t, "named", exec.Command(bin, args...), dir, fmt.Sprintf("127.0.0.1:%d", port))
	awaitA(t, sec, "www.example.net.", []string{"A 192.0.2.1"})
	return sec
}

// siteAt is www.example.net on level 1 (203.0.113.10) or, failed over,
// level 2 (198.51.100.20), beside a site outside the zone.
func siteAt(version uint64, failed bool) *publication.Snapshot {
	s := site("www.example.net", orig("a", "https://203.0.113.10", "healthy"))
	if failed {
		s.Level = 2
		s.Origins = []publication.Origin{orig("b", "https://198.51.100.20", "healthy")}
	}
	return &publication.Snapshot{Version: version, Sites: []publication.Site{s, site("www.other.org", orig("c", "https://203.0.113.30", "healthy"))}}
}

func updaterConfig(t *testing.T, server, zone, secret string) *config.DNSUpdatePublisher {
	t.Setenv(updEnv, secret)
	return &config.DNSUpdatePublisher{Server: server, Zone: zone, TTL: 30, TransitionTTL: 15,
		TSIGKey: updKey, TSIGAlgorithm: "hmac-sha256", TSIGSecretEnv: updEnv, Timeout: 5 * time.Second}
}

func startUpdater(t *testing.T, cfg *config.DNSUpdatePublisher, hub *publish.Hub) (*Updater, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	u, err := NewUpdater(cfg, hub, hclogTo(logs))
	if err != nil {
		t.Fatalf("NewUpdater: %v", err)
	}
	u.Start(t.Context())
	t.Cleanup(u.Close)
	return u, logs
}

// awaitStatus waits until the updater's status of name for version
// satisfies ok, and returns it.
func awaitStatus(t *testing.T, u *Updater, name string, version uint64, ok func(UpdateStatus) bool) UpdateStatus {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, found := u.Status()[name]
		if found && st.Version == version && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of %s never reached the expected one for version %d: %+v", name, version, st)
		}
	}
}

// awaitTTL waits until sec answers name's A records with want and ttl.
func awaitTTL(t *testing.T, sec *secondary, name, want string, ttl uint32) {
	t.Helper()
	awaitA(t, sec, name, []string{want})
	r := exchange(t, sec.addr, q{name: name, qtype: dns.TypeA})
	if r.Answer[0].Header().Ttl != ttl {
		t.Errorf("%s A %s has TTL %d, want %d", name, want, r.Answer[0].Header().Ttl, ttl)
	}
}

// handEdit replaces name's A records at the primary, as an operator would.
func handEdit(t *testing.T, server, name, addr string) {
	t.Helper()
	m := new(dns.Msg)
	m.SetUpdate(updZone)
	rr, _ := dns.NewRR(fmt.Sprintf("%s 300 IN A %s", name, addr))
	m.RemoveRRset([]dns.RR{rr})
	m.Insert([]dns.RR{rr})
	m.SetTsig(updKey, dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second, TsigSecret: map[string]string{updKey: updSecret}}
	r, _, err := c.Exchange(m, server)
	if err != nil || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("hand edit: %v %v", r, err)
	}
}

// TestDynamicUpdate pushes a failover, a hand edit's conflict and the
// next change into BIND.
func TestDynamicUpdate(t *testing.T) {
	bind := startBIND(t)
	hub := publish.NewHub()
	hub.Publish(siteAt(1, false))
	u, logs := startUpdater(t, updaterConfig(t, bind.addr, updZone, updSecret), hub)
	const www = "www.example.net."

	awaitStatus(t, u, www, 1, func(s UpdateStatus) bool { return s.OK })
	awaitTTL(t, bind, www, "A 203.0.113.10", 30)
	if _, pushed := u.Status()["www.other.org."]; pushed {
		t.Error("a site outside the zone was pushed")
	}
	if v := u.View("WWW.example.net"); v == nil || v.State != api.DNSUpdateOK || v.Name != www || v.Version != 1 || v.At == nil || v.Error != "" {
		t.Errorf("the view of an applied update: %+v", v)
	}
	for _, host := range []string{"www.other.org", "example.net", ""} {
		if v := u.View(host); v != nil {
			t.Errorf("View(%q) = %+v; want nil (not updated)", host, v)
		}
	}
	if v := u.View("new.example.net"); v == nil || v.State != api.DNSUpdatePending {
		t.Errorf("the view of a name not pushed yet: %+v; want pending", v)
	}

	begin := time.Now()
	hub.Publish(siteAt(2, true))
	awaitTTL(t, bind, www, "A 198.51.100.20", 15) // failed over: the transition TTL
	t.Logf("failover answered by BIND %v after it was published", time.Since(begin).Round(time.Millisecond))

	// A hand edit, then a change: vigil does not overwrite the edit.
	awaitStatus(t, u, www, 2, func(s UpdateStatus) bool { return s.OK })
	handEdit(t, bind.addr, www, "192.0.2.99")
	hub.Publish(siteAt(3, false))
	st := awaitStatus(t, u, www, 3, func(s UpdateStatus) bool { return !s.OK })
	if !st.Conflict || !strings.Contains(st.Error, "not those vigil last wrote") || st.Failures != 1 {
		t.Errorf("status after a hand edit: %+v; want a conflict", st)
	}
	if v := u.View(www); v == nil || v.State != api.DNSUpdateConflict || v.Failures != 1 || v.Version != 3 || !strings.Contains(v.Error, "not those vigil last wrote") {
		t.Errorf("the view of a conflict: %+v", v)
	}
	awaitA(t, bind, www, []string{"A 192.0.2.99"})
	if !strings.Contains(logs.String(), "dynamic update failed") {
		t.Errorf("the conflict is not logged:\n%s", logs.String())
	}
	// The site's next change writes over it.
	hub.Publish(siteAt(4, true))
	awaitStatus(t, u, www, 4, func(s UpdateStatus) bool { return s.OK })
	awaitTTL(t, bind, www, "A 198.51.100.20", 15)
	if n := u.ok.Load(); n != 3 {
		t.Errorf("%d updates applied, want 3", n)
	}
}

// TestDynamicUpdateRefused: a wrong secret, a zone that takes no
// updates, and no key each fail with an error that says so, on the
// status and in the metric, never showing the secret.
func TestDynamicUpdateRefused(t *testing.T) {
	bind := startBIND(t)
	const wrong = "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0xMjM0NTY="
	tests := []struct {
		name, zone, secret string
		noKey              bool
		want               string
	}{
		{"wrong secret", updZone, wrong, false, "TSIG key vigil-update."},
		{"zone takes no updates", "locked.net.", updSecret, false, "REFUSED: its policy does not let updates with TSIG key vigil-update. change locked.net."},
		{"no key", updZone, updSecret, true, "REFUSED: its policy does not let updates without a key change example.net."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hub := publish.NewHub()
			snap := siteAt(1, true)
			snap.Sites[0].Hostname = "www." + strings.TrimSuffix(tc.zone, ".")
			hub.Publish(snap)
			cfg := updaterConfig(t, bind.addr, tc.zone, tc.secret)
			if tc.noKey {
				cfg.TSIGKey, cfg.TSIGSecretEnv = "", ""
			}
			u, logs := startUpdater(t, cfg, hub)
			st := awaitStatus(t, u, "www."+tc.zone, 1, func(s UpdateStatus) bool { return !s.OK })
			if !strings.Contains(st.Error, tc.want) || st.Conflict {
				t.Errorf("error %q; want it to say %q", st.Error, tc.want)
			}
			if v := u.View("www." + tc.zone); v == nil || v.State != api.DNSUpdateFailing || v.Failures != 1 || v.Error != st.Error {
				t.Errorf("the view of a refused update: %+v; want failing with the error", v)
			}
			if u.failed.Load() != 1 {
				t.Errorf("failed count %d, want 1", u.failed.Load())
			}
			if strings.Contains(logs.String(), tc.secret) || strings.Contains(st.Error, tc.secret) {
				t.Error("the secret is shown")
			}
			if r := exchange(t, bind.addr, q{name: "www." + tc.zone, qtype: dns.TypeA}); strings.Contains(fmt.Sprint(r.Answer), "198.51.100.20") {
				t.Errorf("the refused update was applied: %v", r.Answer)
			}
		})
	}
}

func hclogTo(w *lockedBuffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Debug})
}

// TestDynamicUpdateRetries: the primary is down when the first update is
// due; the updater retries with backoff and succeeds once it is up.
func TestDynamicUpdateRetries(t *testing.T) {
	needDaemon(t, "named", "bind9")
	port := loopbackPort(t)
	hub := publish.NewHub()
	hub.Publish(siteAt(1, true))
	u, logs := startUpdater(t, updaterConfig(t, fmt.Sprintf("127.0.0.1:%d", port), updZone, updSecret), hub)
	for deadline := time.Now().Add(90 * time.Second); u.retries.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no retry while the primary is down:\n%s", logs.String())
		}
	}
	bind := startBINDOn(t, port)
	awaitStatus(t, u, "www.example.net.", 1, func(s UpdateStatus) bool { return s.OK })
	awaitTTL(t, bind, "www.example.net.", "A 198.51.100.20", 15)
	if !strings.Contains(logs.String(), "dynamic update failed; retrying") {
		t.Errorf("the retries are not logged:\n%s", logs.String())
	}
	if st := u.Status()["www.example.net."]; st.Failures != 0 {
		t.Errorf("an update that succeeded on retry counts %d failures", st.Failures)
	}
}

// TestDynamicUpdateViewSkipsHostNames: a site in the zone whose origins
// are host names is not pushed, and its view says so and why; a site
// with addresses is pending until its first update.
func TestDynamicUpdateViewSkipsHostNames(t *testing.T) {
	hub := publish.NewHub()
	u, err := NewUpdater(updaterConfig(t, "127.0.0.1:1", updZone, updSecret), hub, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := &publication.Snapshot{Version: 3, Sites: []publication.Site{
		site("cdn.example.net", orig("a", "https://origin.example.org", "healthy")),
		site("www.example.net", orig("b", "https://203.0.113.10", "healthy")),
	}}
	if want := u.desired(snap); len(want) != 1 {
		t.Fatalf("desired: %v; want www only", want)
	}
	tests := []struct{ host, state, errPart string }{
		{"cdn.example.net", api.DNSUpdateSkipped, "origins are host names"},
		{"www.example.net", api.DNSUpdatePending, ""},
	}
	for _, tc := range tests {
		t.Run(tc.host, func(t *testing.T) {
			v := u.View(tc.host)
			if v == nil || v.State != tc.state || !strings.Contains(v.Error, tc.errPart) || (tc.errPart == "" && v.Error != "") {
				t.Errorf("View(%s) = %+v; want %s with %q", tc.host, v, tc.state, tc.errPart)
			}
		})
	}
}
