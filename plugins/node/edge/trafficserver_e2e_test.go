package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/plugins/node/templates"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// tsEdge is an Apache Traffic Server (traffic_manager and its
// traffic_server) running the shipped parent.config and remap.config
// templates in a runroot of its own, and the template driver that renders
// them.
type tsEdge struct {
	root, listen, ctl string
	tm                *edge.Template
}

// startTrafficServer makes a runroot in a temporary directory (its own
// records.config: no cache, so that every GET reaches an origin; no user
// switch; parents reached without a DNS lookup of the site's hostname),
// renders builtin:trafficserver-parent and -remap for first, starts
// traffic_manager on it, listening on loopback, and returns the driver:
// reload with traffic_ctl config reload. Traffic Server has no offline
// check of parent.config: errors show in its diags.log (see diagErrors).
func startTrafficServer(t *testing.T, first []publication.Site) *tsEdge {
	t.Helper()
	manager := peer(t, "traffic_manager")
	ts := &tsEdge{root: t.TempDir(), listen: testnet.Addr(t), ctl: peer(t, "traffic_ctl")}
	peer(t, "traffic_server")
	for _, d := range []string{"etc", "run", "log", "cache", "var"} {
		if err := os.MkdirAll(filepath.Join(ts.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ts.root, "runroot.yaml"), strings.ReplaceAll(`prefix: ROOT
exec_prefix: /usr
bindir: /usr/bin
sbindir: /usr/sbin
sysconfdir: ROOT/etc
datadir: /usr/share/trafficserver
includedir: /usr/include
libdir: /usr/lib/trafficserver
libexecdir: /usr/lib/trafficserver/modules
localstatedir: ROOT/var
runtimedir: ROOT/run
logdir: ROOT/log
cachedir: ROOT/cache
`, "ROOT", ts.root))
	etc := filepath.Join(ts.root, "etc")
	writeFile(t, filepath.Join(etc, "records.config"), `CONFIG proxy.config.http.server_ports STRING `+ts.listen+`
CONFIG proxy.config.admin.user_id STRING #-1
CONFIG proxy.config.http.cache.http INT 0
CONFIG proxy.config.reverse_proxy.enabled INT 1
CONFIG proxy.config.url_remap.remap_required INT 1
CONFIG proxy.config.http.no_dns_just_forward_to_parent INT 1
CONFIG proxy.config.http.uncacheable_requests_bypass_parent INT 0
CONFIG proxy.config.http.parent_proxy.self_detect INT 0
CONFIG proxy.config.http.insert_response_via_str INT 0
CONFIG proxy.config.exec_thread.autoconfig INT 0
CONFIG proxy.config.exec_thread.limit INT 2
CONFIG proxy.config.cache.threads_per_disk INT 2
`)
	writeFile(t, filepath.Join(etc, "storage.config"), filepath.Join(ts.root, "cache")+" 32M\n")
	writeFile(t, filepath.Join(etc, "ip_allow.yaml"), "ip_allow:\n  - apply: in\n    ip_addrs: 127.0.0.1\n    action: allow\n")
	for _, f := range []string{"cache.config", "hosting.config", "logging.yaml", "plugin.config", "sni.yaml", "socks.config",
		"splitdns.config", "ssl_multicert.config", "strategies.yaml", "volume.config"} {
		writeFile(t, filepath.Join(etc, f), "")
	}
	var files []edge.File
	for _, name := range []string{"parent", "remap"} {
		text, err := templates.Get("trafficserver-" + name)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, edge.File{Text: text, Dest: filepath.Join(etc, name+".config")})
	}
	var err error
	ts.tm, err = edge.NewTemplate(edge.TemplateOptions{Name: "trafficserver", Files: files,
		Reload: fmt.Sprintf("TS_RUNROOT=%s %s config reload", ts.root, ts.ctl), MinInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := edge.Build(snapshotOf(1, first), nil, "", nil)
	if _, err := ts.tm.Write(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	daemon(t, ts.root, "/usr/bin/env", "TS_RUNROOT="+ts.root, manager)
	var names []string
	for _, o := range first[0].Origins {
		names = append(names, o.Name)
	}
	waitServing(t, "http://"+ts.listen+"/", names)
	return ts
}

// diagErrors are the lines of Traffic Server's diags.log that report an
// error (a parent.config line it could not read, among others).
func (ts *tsEdge) diagErrors() []string {
	b, _ := os.ReadFile(filepath.Join(ts.root, "log", "diags.log"))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, " ERROR: ") {
			out = append(out, line)
		}
	}
	return out
}

// loads counts how many times Traffic Server read parent.config.
func (ts *tsEdge) loads() int {
	b, _ := os.ReadFile(filepath.Join(ts.root, "log", "diags.log"))
	return strings.Count(string(b), "parent.config finished loading")
}

// TestTrafficServerTemplate: Traffic Server driven by
// builtin:trafficserver-parent and -remap, reloaded with traffic_ctl
// config reload at each switch, under about 50 GETs a second: a GET lands
// on level 1, then on level 2 after the failover, then on level 1 again.
// The switch times are reported, not asserted.
func TestTrafficServerTemplate(t *testing.T) {
	l := newLevels(t)
	ts := startTrafficServer(t, l.site(1))
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	a, err := startAgentVars(t, cp, nil, ts.tm)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ts.listen + "/"
	waitServing(t, url, l.names(1))
	switchesAt(t, "trafficserver-template", url, cp, l, switchRounds, 50, 2)
	for _, s := range a.EdgeStatus() {
		if s.Err != nil {
			t.Errorf("edge %s: %v", s.Edge, s.Err)
		}
	}
	if errs := ts.diagErrors(); len(errs) > 0 {
		t.Errorf("Traffic Server logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestTrafficServerTemplatesAccepted: the shipped parent.config and
// remap.config, rendered from every checked View (two levels, a ramp, no
// current origin, no origin, no site, https and IPv6 origins), are read by
// the real Traffic Server without an error, one reload after another.
func TestTrafficServerTemplatesAccepted(t *testing.T) {
	l := newLevels(t)
	ts := startTrafficServer(t, l.site(1))
	for name, v := range checkedViews() {
		t.Run(name, func(t *testing.T) {
			before := ts.loads()
			if _, err := ts.tm.Write(context.Background(), v); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("/usr/bin/env", "TS_RUNROOT="+ts.root, ts.ctl, "config", "reload").CombinedOutput()
			if err != nil {
				t.Fatalf("traffic_ctl config reload: %v: %s", err, out)
			}
			waitFor(t, func() error {
				if ts.loads() > before {
					return nil
				}
				return fmt.Errorf("Traffic Server did not read parent.config again (%d loads)", before)
			})
			if errs := ts.diagErrors(); len(errs) > 0 {
				b, _ := os.ReadFile(filepath.Join(ts.root, "etc", "parent.config"))
				t.Fatalf("Traffic Server logged errors:\n%s\nparent.config:\n%s", strings.Join(errs, "\n"), b)
			}
		})
	}
}

// TestTrafficServerUnknownHost: a Host no site names gets Traffic Server's
// own 404 (remap required), never an origin's answer.
func TestTrafficServerUnknownHost(t *testing.T) {
	l := newLevels(t)
	ts := startTrafficServer(t, l.site(1))
	url := "http://" + ts.listen + "/"
	client := &http.Client{Timeout: 5 * time.Second}
	for _, host := range []string{"unknown.example.org", "example.com", ts.listen} {
		t.Run("host="+host, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("Host %q: HTTP %d %q, want Traffic Server's 404", host, resp.StatusCode, b)
			}
			for _, name := range []string{"a1", "a2", "b1"} {
				if strings.TrimSpace(string(b)) == name {
					t.Errorf("Host %q was answered by origin %s", host, name)
				}
			}
		})
	}
}

// TestTrafficServerTemplateRamp: during a failback ramp both levels are
// parents with their weights, hashed; with consistent_hash=on the next
// level is the secondary parent list. (IPv4 origins: checkedViews' level
// 2 is IPv6, which parent.config cannot take.)
func TestTrafficServerTemplateRamp(t *testing.T) {
	topo := edge.Topology{"www": {
		{Name: "a1", Address: "http://127.0.0.1:8081", Level: 1, State: "healthy"},
		{Name: "a2", Address: "http://127.0.0.1:8082", Level: 1, State: "healthy"},
		{Name: "b1", Address: "http://127.0.0.1:8083", Level: 2, State: "healthy"},
	}}
	a := []publication.Origin{{Name: "a1", Address: "http://127.0.0.1:8081", State: "healthy"}, {Name: "a2", Address: "http://127.0.0.1:8082", State: "healthy"}}
	ramp := publication.Site{Name: "www", Hostname: "www.example.com", Level: 1, Origins: a,
		Ramp: &publication.Ramp{Weight: 25, From: 2, FromOrigins: []publication.Origin{{Name: "b1", Address: "http://127.0.0.1:8083", State: "healthy"}}}}
	plain := publication.Site{Name: "www", Hostname: "www.example.com", Level: 1, Origins: a}
	text, err := templates.Get("trafficserver-parent")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		site publication.Site
		vars map[string]string
		want string
	}{
		{"ramp", ramp, nil, `parent="127.0.0.1:8081|25;127.0.0.1:8082|25;127.0.0.1:8083|150" round_robin=consistent_hash`},
		{"plain", plain, nil, `parent="127.0.0.1:8081|1;127.0.0.1:8082|1" round_robin=strict`},
		{"consistent_hash=on", plain, map[string]string{"consistent_hash": "on"},
			`parent="127.0.0.1:8081|1;127.0.0.1:8082|1" secondary_parent="127.0.0.1:8083|1" round_robin=consistent_hash`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "trafficserver", Files: []edge.File{{Text: text, Dest: filepath.Join(t.TempDir(), "parent.config")}}})
			if err != nil {
				t.Fatal(err)
			}
			v, _ := edge.Build(snapshotOf(1, []publication.Site{tt.site}), topo, "", tt.vars)
			out, err := tm.Render(v)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out[0]), tt.want) {
				t.Errorf("no %q in parent.config:\n%s", tt.want, out[0])
			}
		})
	}
}
