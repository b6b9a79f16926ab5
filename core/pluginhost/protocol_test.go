package pluginhost

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// origins serves a plain and a TLS origin on loopback. The TLS one's
// certificate is signed by no CA the system trusts: only its bundle, in
// the ballot, makes it verifiable.
func origins(t *testing.T) (plain, private string, bundle []byte) {
	t.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	p := httptest.NewServer(ok)
	t.Cleanup(p.Close)
	s := httptest.NewTLSServer(ok)
	t.Cleanup(s.Close)
	bundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return p.URL, s.URL, bundle
}

// capsBallot is one round of three origins of site "settings": a plain
// one, one behind a private CA with its bundle, and the same without it.
func capsBallot(plain, private string, bundle []byte) sdk.Ballot {
	target := func(origin, address, ca string) sdk.Target {
		return sdk.Target{Site: "settings", Origin: origin, Address: address, Host: "example.com", Path: "/",
			Timeout: 10 * time.Second, TLS: sdk.TLSSettings{CA: ca}}
	}
	return sdk.Ballot{Round: 1, CAs: map[string][]byte{"sha256:test": bundle}, Targets: []sdk.Target{
		target("plain", plain, ""),
		target("private", private, "sha256:test"),
		target("nobundle", private, ""),
	}}
}

func startSource(t *testing.T, plugin, config string, env []string) (*Source, *sdktest.LogBuffer) {
	t.Helper()
	logs := &sdktest.LogBuffer{}
	src := New(Spec{Name: "compat", Plugin: plugin, Timeout: 30 * time.Second, Env: env,
		Config: parseConfig(t, config), Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs})})
	t.Cleanup(src.Close)
	if diags := src.Start(context.Background()); diags.HasErrors() {
		t.Fatalf("Start: %v\nlogs:\n%s", diags, logs)
	}
	return src, logs
}

func byOrigin(votes []sdk.Vote) map[string]sdk.Vote {
	m := map[string]sdk.Vote{}
	for _, v := range votes {
		m[v.Origin] = v
	}
	return m
}

// TestCompatibilityPromise runs a plugin of each protocol against today's
// host, as sdk/PROTOCOL.md promises: the host speaks protocol 1 to a
// protocol-1 plugin and never hands it a target that needs what protocol 1
// cannot carry (it abstains for it with a reason); a protocol-2 plugin
// gets what its capabilities declare, and an abstention for the rest.
func TestCompatibilityPromise(t *testing.T) {
	plain, private, bundle := origins(t)
	for _, tc := range []struct {
		name     string
		plugin   string
		config   string
		caps     string // VIGIL_TEST_CAPS for testsource
		protocol int
		sdk      string
		want     map[string]string // origin: "value reason voter detail-substring"
	}{
		{"protocol 1, frozen", v1Plugin, ``, "", 1, "", map[string]string{
			// The plain origin is checked for real; the private CA's is
			// held back, which the plugin would have voted down for
			// tls_failed (as it does where the site gives no bundle).
			"plain":    "up ok v1 unknown=0",
			"private":  "abstain unsupported vigil vigil/missing_capability: plugin v1source speaks vote-source protocol 1, which cannot carry the health check's ca_file",
			"nobundle": "down tls_failed v1 unknown=0",
		}},
		{"protocol 2 with tls.ca_bundle", testPlugin, `voter = "v2"`, "tls.ca_bundle,abstain", 2, sdk.Version, map[string]string{
			"plain":    "up ok v2 ca= pem=0",
			"private":  "up ok v2 ca=sha256:test pem=" + strconv.Itoa(len(bundle)),
			"nobundle": "up ok v2 ca= pem=0",
		}},
		{"protocol 2 without tls.ca_bundle", testPlugin, `voter = "v2"`, "abstain", 2, sdk.Version, map[string]string{
			"plain":    "up ok v2 ca= pem=0",
			"private":  "abstain unsupported vigil vigil/missing_capability: plugin testsource does not declare tls.ca_bundle, which the health check's ca_file needs",
			"nobundle": "up ok v2 ca= pem=0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VIGIL_TEST_CAPS", tc.caps)
			src, logs := startSource(t, tc.plugin, tc.config, []string{"VIGIL_TEST_CAPS"})
			info := src.Info()
			if info.ProtocolVersion != tc.protocol || info.SDKVersion != tc.sdk {
				t.Errorf("Info = %+v, want protocol %d, SDK %q", info, tc.protocol, tc.sdk)
			}
			if tc.protocol == 1 {
				if len(info.Capabilities) != 0 {
					t.Errorf("a protocol-1 plugin has capabilities %v", info.Capabilities)
				}
				logs.WaitFor(t, time.Minute, "[WARN]", "speaks vote-source protocol 1")
			}
			votes, err := src.Vote(context.Background(), capsBallot(plain, private, bundle))
			if err != nil {
				t.Fatalf("Vote: %v\nlogs:\n%s", err, logs)
			}
			got := byOrigin(votes)
			if len(votes) != len(tc.want) {
				t.Errorf("%d votes, want %d: %+v", len(votes), len(tc.want), votes)
			}
			held := 0
			for origin, want := range tc.want {
				v, ok := got[origin]
				if !ok {
					t.Errorf("no vote for %s", origin)
					continue
				}
				f := strings.SplitN(want, " ", 4)
				shown := v.Detail // as operators read it: the plugin reason first
				if v.PluginReason != "" {
					shown = v.PluginReason + ": " + v.Detail
				}
				if v.Value.String() != f[0] || v.Reason.String() != f[1] || v.Voter != f[2] || !strings.Contains(shown, f[3]) {
					t.Errorf("%s: %s %s from %s, %q; want %s", origin, v.Value, v.Reason, v.Voter, shown, want)
				}
				if v.Voter == HostVoter {
					held++
				}
			}
			if st := src.Stats(); st.Unsupported != uint64(held) || st.Failures != 0 {
				t.Errorf("stats = %+v, want %d unsupported and no failure", st, held)
			}
			if held > 0 {
				logs.WaitFor(t, time.Minute, "[WARN]", "lacks capabilities")
			}
		})
	}
}

// TestEveryTargetHeldBack: when no target can go to the plugin, the host
// abstains on all without asking it.
func TestEveryTargetHeldBack(t *testing.T) {
	t.Setenv("VIGIL_TEST_CAPS", "")
	src, _ := startSource(t, testPlugin, `voter = "v"`, []string{"VIGIL_TEST_CAPS"})
	b := ballot("error", 2) // the plugin would fail the round
	for i := range b.Targets {
		b.Targets[i].Headers = map[string]string{"Authorization": "Bearer secret"}
	}
	votes, err := src.Vote(context.Background(), b)
	if err != nil {
		t.Fatalf("Vote: %v (the plugin was asked)", err)
	}
	if len(votes) != 2 || votes[0].Value != sdk.Abstain || !strings.Contains(votes[0].Detail, "http.headers") || strings.Contains(votes[0].Detail, "secret") {
		t.Errorf("votes = %+v", votes)
	}
}

// TestCheckNamesMissingCapability: vigil validate's check of a source
// warns at the source's block of each capability its sites need that the
// plugin does not declare, and names the sites.
func TestCheckNamesMissingCapability(t *testing.T) {
	block := hcl.Range{Filename: "vigil.hcl", Start: hcl.Pos{Line: 12, Column: 1, Byte: 200}, End: hcl.Pos{Line: 12, Column: 20, Byte: 219}}
	needs := []Need{{Capability: sdk.CapabilityCABundle, Sites: []string{"api", "www"}}, {Capability: sdk.CapabilityHeaders, Sites: []string{"api"}}}
	for _, tc := range []struct {
		name, plugin, config, caps string
		want                       []string // a substring of each warning, in order
	}{
		{"protocol 1", v1Plugin, ``, "", []string{
			"speaks vote-source protocol 1, which cannot carry the health check's ca_file, and sites api, www set it",
			"speaks vote-source protocol 1, which cannot carry the health check's headers, and site api sets it"}},
		{"protocol 2 lacking one", testPlugin, `voter = "v"`, "tls.ca_bundle", []string{
			"does not declare the capability http.headers, which the health check's headers needs, and site api sets it"}},
		{"protocol 2 with both", testPlugin, `voter = "v"`, "tls.ca_bundle,http.headers", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VIGIL_TEST_CAPS", tc.caps)
			src := New(Spec{Name: "edges", Plugin: tc.plugin, Env: []string{"VIGIL_TEST_CAPS"}, Config: parseConfig(t, tc.config), Range: block})
			diags := src.Check(context.Background(), CheckOptions{Needs: needs})
			if diags.HasErrors() {
				t.Fatalf("Check: %v", diags)
			}
			if len(diags) != len(tc.want) {
				t.Fatalf("%d diagnostics, want %d: %v", len(diags), len(tc.want), diags)
			}
			for i, d := range diags {
				if d.Severity != hcl.DiagWarning || d.Subject == nil || d.Subject.Filename != "vigil.hcl" || d.Subject.Start.Line != 12 ||
					!strings.Contains(d.Detail, tc.want[i]) || !strings.Contains(d.Detail, `Source "edges"`) {
					t.Errorf("diagnostic %d = %s at %v: %s\nwant a warning at vigil.hcl:12 saying %q", i, d.Summary, d.Subject, d.Detail, tc.want[i])
				}
			}
		})
	}
}

func TestNeeds(t *testing.T) {
	hc := func(mod func(*config.HealthCheck)) *config.HealthCheck {
		h := &config.HealthCheck{Path: "/"}
		mod(h)
		return h
	}
	cfg := &config.Config{Sites: []*config.Site{
		{Name: "www", Sources: []string{"direct", "edges"}, HealthCheck: hc(func(h *config.HealthCheck) { h.CAName = "sha256:x" }),
			Origins: []*config.Origin{{Name: "a", Address: "https://192.0.2.1"}}},
		{Name: "api", Sources: []string{"edges"}, HealthCheck: hc(func(h *config.HealthCheck) {
			h.CAName, h.Headers, h.FollowRedirects = "sha256:y", map[string]string{"X": "1"}, true
		}), Origins: []*config.Origin{{Name: "a", Address: "https://192.0.2.2"}}},
		// TLS settings of a plain-http origin need nothing.
		{Name: "plain", Sources: []string{"edges"}, HealthCheck: hc(func(h *config.HealthCheck) { h.CAName = "sha256:z" }),
			Origins: []*config.Origin{{Name: "a", Address: "http://192.0.2.3"}}},
		{Name: "other", Sources: []string{"direct"}, HealthCheck: hc(func(h *config.HealthCheck) { h.MaxBody = 10 }),
			Origins: []*config.Origin{{Name: "a", Address: "http://192.0.2.4"}}},
	}}
	got := Needs(cfg, "edges")
	want := []Need{
		{Capability: sdk.CapabilityFollowRedirects, Sites: []string{"api"}},
		{Capability: sdk.CapabilityHeaders, Sites: []string{"api"}},
		{Capability: sdk.CapabilityCABundle, Sites: []string{"api", "www"}},
	}
	if len(got) != len(want) {
		t.Fatalf("Needs = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Capability != want[i].Capability || strings.Join(got[i].Sites, ",") != strings.Join(want[i].Sites, ",") {
			t.Errorf("Needs[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestRestartRereadsInfo: a plugin binary replaced by one of another
// protocol (an upgrade or a rollback) is asked for its Info again when
// the host restarts it, and the host adapts to the new answer.
func TestRestartRereadsInfo(t *testing.T) {
	plain, private, bundle := origins(t)
	bin := filepath.Join(t.TempDir(), "vigil-source-swapped")
	copyFile(t, testPlugin, bin)
	t.Setenv("VIGIL_TEST_CAPS", "tls.ca_bundle")
	src, logs := startSource(t, bin, `voter = "v2"`, []string{"VIGIL_TEST_CAPS"})
	if info := src.Info(); info.ProtocolVersion != 2 || !info.Has(sdk.CapabilityCABundle) {
		t.Fatalf("Info = %+v", info)
	}
	copyFile(t, v1Plugin, bin) // the rollback
	pid := src.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to notice the exit", 10*time.Second, func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.proc.client.Exited()
	})
	votes, err := src.Vote(context.Background(), capsBallot(plain, private, bundle))
	if err != nil {
		t.Fatalf("Vote after the restart: %v\nlogs:\n%s", err, logs)
	}
	if info := src.Info(); info.ProtocolVersion != 1 || info.Name != "v1source" || len(info.Capabilities) != 0 {
		t.Errorf("Info after the restart = %+v, want the protocol-1 plugin's", info)
	}
	if v := byOrigin(votes)["private"]; v.Voter != HostVoter || v.Value != sdk.Abstain {
		t.Errorf("the private CA's origin after the restart: %+v, want the host's abstention", v)
	}
	if v := byOrigin(votes)["plain"]; v.Voter != "v1" || v.Value != sdk.Up {
		t.Errorf("the plain origin after the restart: %+v, want the protocol-1 plugin's up", v)
	}
}

// copyFile copies an executable by writing a new file and renaming it
// over dst, as a package upgrade does (a running binary is not written).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}
