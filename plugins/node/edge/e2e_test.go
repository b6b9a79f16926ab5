package edge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
	"github.com/vigilcdn/vigil/plugins/node/templates"
)

// switchRounds is how many failovers (and as many failbacks) each edge
// makes under load.
const switchRounds = 3

// haproxyConfig is what an operator declares for the runtime driver: the
// stats socket at level admin, a frontend routing by Host, and an empty
// backend per site for vigil-node to fill.
func haproxyConfig(sock, listen string) string {
	return fmt.Sprintf(`global
    stats socket %s mode 600 level admin
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 1
    option redispatch
frontend fe
    bind %s
    use_backend www if { req.hdr(host),lower,word(1,:) -m str %s }
backend www
    balance roundrobin
`, sock, listen, hostname)
}

// startHAProxy runs haproxy (master-worker, foreground) on cfg and waits
// for its stats socket.
func startHAProxy(t *testing.T, bin, dir, cfg, sock string) {
	t.Helper()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon(t, dir, bin, "-W", "-db", "-f", path, "-p", filepath.Join(dir, "master.pid"))
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := h.Command(context.Background(), "show info"); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("haproxy's stats socket never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHAProxyRuntime: vigil-node adds the servers of the current level to
// an empty backend, keeps the other level's in maintenance, and switches
// under load by changing server states only, with no reload.
func TestHAProxyRuntime(t *testing.T) {
	bin := peer(t, "haproxy")
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	startHAProxy(t, bin, dir, haproxyConfig(sock, listen), sock)

	l := newLevels(t)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, cp, h)
	url := "http://" + listen + "/"
	waitServing(t, url, l.names(1))

	// The other level's server exists, in maintenance, once the topology
	// is known.
	waitFor(t, func() error {
		out, err := h.Command(context.Background(), "show servers state www")
		if err != nil {
			return err
		}
		if !strings.Contains(out, " b1 ") {
			return fmt.Errorf("no b1 server yet:\n%s", out)
		}
		return nil
	})
	switches(t, "haproxy-runtime", url, cp, l, switchRounds)
	for _, s := range a.EdgeStatus() {
		if s.Err != nil {
			t.Errorf("edge %s: %v", s.Edge, s.Err)
		}
	}
	out, _ := h.Command(context.Background(), "show servers state www")
	t.Logf("servers after the switches:\n%s", out)
}

// TestHAProxyRuntimeUnreachable: with no HAProxy yet, the driver reports
// a clear error and retries; once HAProxy is up, the publication is
// applied without anyone's help.
func TestHAProxyRuntimeUnreachable(t *testing.T) {
	bin := peer(t, "haproxy")
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	l := newLevels(t)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	cp.Publish(l.site(2))
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, cp, h)
	waitFor(t, func() error {
		st := a.EdgeStatus()[0]
		if st.Err == nil {
			return errors.New("no error yet")
		}
		if !errors.Is(st.Err, edge.ErrRuntimeUnreachable) || !strings.Contains(st.Err.Error(), "stats socket") {
			t.Fatalf("error %q does not say the socket is unreachable", st.Err)
		}
		return nil
	})
	startHAProxy(t, bin, dir, haproxyConfig(sock, listen), sock)
	waitServing(t, "http://"+listen+"/", l.names(2))
	waitFor(t, func() error {
		if st := a.EdgeStatus()[0]; st.Err != nil || st.Applied == 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

// TestHAProxyFallback: a site whose backend HAProxy does not declare is
// applied by rendering the whole configuration and reloading.
func TestHAProxyFallback(t *testing.T) {
	bin := peer(t, "haproxy")
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	// Started with a configuration that has no backend for the site.
	startHAProxy(t, bin, dir, strings.ReplaceAll(haproxyConfig(sock, listen), "backend www", "backend other"), sock)

	text, err := templates.Get("haproxy")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := edge.NewTemplate(edge.TemplateOptions{Name: "haproxy-fallback",
		Files: []edge.File{{Text: text, Dest: cfgPath}}, Check: bin + " -c -q -f " + edge.CandidatePlaceholder,
		Reload: "kill -USR2 $(cat " + filepath.Join(dir, "master.pid") + ")"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock, Fallback: fb})
	if err != nil {
		t.Fatal(err)
	}
	l := newLevels(t)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	a, err := startAgentVars(t, cp, map[string]string{"listen": listen, "stats_socket": sock}, h)
	if err != nil {
		t.Fatal(err)
	}
	waitServing(t, "http://"+listen+"/", l.names(1))
	cp.Publish(l.site(2)) // now through the runtime: the backend exists
	waitServing(t, "http://"+listen+"/", l.names(2))
	waitFor(t, func() error {
		if st := a.EdgeStatus()[0]; st.Err != nil || st.Applied != 2 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	// The rendered haproxy.cfg's servers are the runtime driver's: b1 a
	// plain server, a1:backup one with the backup flag, so level 1 is
	// only level 2's backup after the switch.
	direct, err := edge.NewHAProxy(edge.HAProxyOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	wantStates(t, direct, "level 2 through the runtime", map[string]string{"b1": "ready", "a1": "maint", "a2": "maint",
		"a1:backup": "ready", "a2:backup": "ready", "b1:backup": "maint"})
	if got, want := backupFlags(t, direct), map[string]bool{"a1": false, "a2": false, "b1": false,
		"a1:backup": true, "a2:backup": true, "b1:backup": true}; !maps.Equal(got, want) {
		t.Errorf("backup flags %v, want %v", got, want)
	}
}

// backupFlags is, for each server of backend www, whether it has HAProxy's
// backup flag (show stat's bck column).
func backupFlags(t *testing.T, h *edge.HAProxy) map[string]bool {
	t.Helper()
	out, err := h.Command(context.Background(), "show stat")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	col := map[string]int{}
	for i, c := range strings.Split(strings.TrimPrefix(lines[0], "# "), ",") {
		col[c] = i
	}
	got := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) <= col["bck"] || f[col["pxname"]] != "www" || f[col["svname"]] == "BACKEND" {
			continue
		}
		got[f[col["svname"]]] = f[col["bck"]] == "1"
	}
	return got
}

// TestHAProxyTemplate: HAProxy driven by the template mode alone (a
// rendered haproxy.cfg and a graceful master-worker reload per switch).
func TestHAProxyTemplate(t *testing.T) {
	bin := peer(t, "haproxy")
	dir := t.TempDir()
	sock, listen := filepath.Join(dir, "admin.sock"), testnet.Addr(t)
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	text, err := templates.Get("haproxy")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "haproxy", Files: []edge.File{{Text: text, Dest: cfgPath}},
		Check: bin + " -c -q -f " + edge.CandidatePlaceholder, Reload: "kill -USR2 $(cat " + filepath.Join(dir, "master.pid") + ")",
		MinInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l := newLevels(t)
	vars := map[string]string{"listen": listen, "stats_socket": sock}
	v, _ := edge.Build(snapshotOf(1, l.site(1)), nil, "", vars)
	if _, err := tm.Write(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	daemon(t, dir, bin, "-W", "-db", "-f", cfgPath, "-p", filepath.Join(dir, "master.pid"))
	waitFor(t, func() error {
		if !fileExists(filepath.Join(dir, "master.pid")) {
			return errors.New("no pid file yet")
		}
		return nil
	})
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	if _, err := startAgentVars(t, cp, vars, tm); err != nil {
		t.Fatal(err)
	}
	switches(t, "haproxy-template", "http://"+listen+"/", cp, l, switchRounds)
}

// TestNginxTemplate: nginx driven by the shipped template (an upstream per
// site with the next level as backup servers), checked with nginx -t and
// reloaded with SIGHUP.
func TestNginxTemplate(t *testing.T) {
	bin := peer(t, "nginx")
	dir := t.TempDir()
	listen := testnet.Addr(t)
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := nginxConfig(dir, "1", 1024, "    include "+dir+"/conf.d/*.conf;")
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ngx := fmt.Sprintf("%s -p %s -c %s -e %s/error.log", bin, dir, confPath, dir)
	cmd := daemon(t, dir, bin, "-p", dir, "-c", confPath, "-e", dir+"/error.log")
	text, err := templates.Get("nginx")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "nginx", Files: []edge.File{{Text: text, Dest: filepath.Join(dir, "conf.d", "vigil.conf")}},
		Check: ngx + " -t -q", Reload: fmt.Sprintf("kill -HUP %d", cmd.Process.Pid), MinInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() error {
		if !fileExists(filepath.Join(dir, "nginx.pid")) {
			return errors.New("nginx has not started")
		}
		return nil
	})
	l := newLevels(t)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	if _, err := startAgentVars(t, cp, map[string]string{"listen": listen}, tm); err != nil {
		t.Fatal(err)
	}
	waitServing(t, "http://"+listen+"/", l.names(1))
	// The next level is there as backup servers once the topology is in.
	waitFor(t, func() error {
		b, _ := os.ReadFile(filepath.Join(dir, "conf.d", "vigil.conf"))
		if !strings.Contains(string(b), " backup;") {
			return fmt.Errorf("no backup server yet:\n%s", b)
		}
		return nil
	})
	switches(t, "nginx-template", "http://"+listen+"/", cp, l, switchRounds)
}

// waitFor polls cond until it returns nil. The deadline (two minutes, a
// few seconds' wait on an idle machine) only catches a hang: the suite
// must pass with CPU-bound processes beside it.
func waitFor(t testing.TB, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNginxDefaultServer: with the shipped template, a Host no site names
// gets nginx's own 421, never an origin's answer; the site's Host still
// reaches its origins.
func TestNginxDefaultServer(t *testing.T) {
	bin := peer(t, "nginx")
	dir := t.TempDir()
	listen := testnet.Addr(t)
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "nginx.conf")
	writeFile(t, confPath, nginxConfig(dir, "1", 64, "    include "+dir+"/conf.d/*.conf;"))
	text, err := templates.Get("nginx")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "nginx", Files: []edge.File{{Text: text, Dest: filepath.Join(dir, "conf.d", "vigil.conf")}},
		Check: fmt.Sprintf("%s -p %s -c %s -e %s/error.log -t -q", bin, dir, confPath, dir)})
	if err != nil {
		t.Fatal(err)
	}
	l := newLevels(t)
	v, _ := edge.Build(snapshotOf(1, l.site(1)), nil, "", map[string]string{"listen": listen})
	if _, err := tm.Write(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	daemon(t, dir, bin, "-p", dir, "-c", confPath, "-e", dir+"/error.log")
	url := "http://" + listen + "/"
	waitServing(t, url, l.names(1))
	unknownHost(t, url)
}

// unknownHost checks that Hosts no site names get the edge's own 421,
// never an origin's answer.
func unknownHost(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, host := range []string{"unknown.example.org", "example.com", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")} {
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
			if resp.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("Host %q: HTTP %d %q, want nginx's 421", host, resp.StatusCode, b)
			}
			for _, name := range []string{"a1", "a2", "b1"} {
				if strings.TrimSpace(string(b)) == name {
					t.Errorf("Host %q was answered by origin %s", host, name)
				}
			}
		})
	}
}
