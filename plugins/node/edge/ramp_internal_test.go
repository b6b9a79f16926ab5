package edge

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/plugins/node/templates"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// rampSnap is www back at level 1 (a1, a2 of topo) ramping from level 2
// (b1) with weight.
func rampSnap(weight int) *publication.Snapshot {
	s := snap(5, 1, publication.Origin{Name: "a1", Address: "http://192.0.2.1:8080", State: "healthy"},
		publication.Origin{Name: "a2", Address: "https://192.0.2.2", State: "healthy"})
	s.Format = publication.FormatRamp
	s.Sites[0].Ramp = &publication.Ramp{Weight: weight, From: 2,
		FromOrigins: []publication.Origin{{Name: "b1", Address: "http://[2001:db8::1]", State: "healthy"}}}
	return s
}

func TestBuildRamp(t *testing.T) {
	v, _ := Build(rampSnap(25), topo, "", nil)
	s := v.Sites[0]
	if s.Ramp == nil {
		t.Fatal("no ramp in the view")
	}
	r := s.Ramp
	// Two servers here, one there: 25% and 75% of the requests are
	// 25*1 per server here and 75*2 there (over their divisor 1).
	if r.Weight != 25 || r.FromWeight != 75 || r.From != 2 || r.ServerWeight != 25 || r.FromServerWeight != 150 {
		t.Errorf("ramp %+v", r)
	}
	if got := names(r.Origins); strings.Join(got, ",") != "b1" || r.Origins[0].Weight != 150 || r.Origins[0].Level != 2 {
		t.Errorf("ramp origins %+v", r.Origins)
	}
	for _, o := range s.Origins {
		if o.Weight != 25 {
			t.Errorf("origin %s weight %d, want 25", o.Name, o.Weight)
		}
	}
	// b1 serves: it is neither a backup nor kept out of service.
	if got := names(s.Others); strings.Join(got, ",") != "c1" {
		t.Errorf("others %v, want c1", got)
	}
	if got := names(s.Backup); strings.Join(got, ",") != "c1" {
		t.Errorf("backup %v, want c1", got)
	}
	for _, w := range []int{0, 100} {
		v, _ := Build(rampSnap(w), topo, "", nil)
		if v.Sites[0].Ramp != nil || v.Sites[0].Origins[0].Weight != 0 {
			t.Errorf("weight %d: ramp %+v", w, v.Sites[0].Ramp)
		}
	}
}

func TestServerWeights(t *testing.T) {
	for _, tt := range []struct{ weight, n, nFrom, w, wf int }{
		{25, 1, 1, 25, 75},
		{25, 2, 2, 25, 75},
		{25, 2, 1, 25, 150},
		{5, 3, 2, 10, 285 * 256 / 285}, // 10 and 285, scaled to 256
		{99, 1, 4, 256, 1},
		{50, 0, 1, 50, 50},
	} {
		w, wf := serverWeights(tt.weight, tt.n, tt.nFrom)
		if tt.weight == 5 {
			tt.w = 9 // 10*256/285 rounded
		}
		if w != tt.w || wf != tt.wf {
			t.Errorf("serverWeights(%d, %d, %d) = %d, %d; want %d, %d", tt.weight, tt.n, tt.nFrom, w, wf, tt.w, tt.wf)
		}
	}
}

// ipTopo is topo with IP addresses only, for the edges' checks.
var ipTopo = Topology{"www": {topo["www"][0], topo["www"][1], topo["www"][2],
	{Name: "c1", Address: "http://192.0.2.3", Level: 3, State: "unknown"}}}

// TestShippedTemplatesRamp: during a ramp the shipped templates serve both
// levels' servers with their weights (and, with nginx and haproxy
// installed, the rendered files pass their checks); without one, no
// weight is written.
func TestShippedTemplatesRamp(t *testing.T) {
	for _, tt := range []struct {
		name      string
		want, not []string
	}{
		{"nginx", []string{
			"level 1, ramping back from level 2: 25% here, 75% there",
			"server 192.0.2.1:8080 weight=25 max_fails=1",
			"server 192.0.2.2:443 weight=25 max_fails=1",
			"server [2001:db8::1]:80 weight=150 max_fails=1",
			"server 192.0.2.3:80 backup;"},
			[]string{"[2001:db8::1]:80 backup"}},
		{"haproxy", []string{
			"level 1, ramping back from level 2: 25% here, 75% there",
			"server a1 192.0.2.1:8080 weight 25\n",
			"server a2 192.0.2.2:443 ssl verify required ca-file @system-ca sni str(www.example.com) weight 25\n",
			"server b1 [2001:db8::1]:80 weight 150\n",
			"server c1:backup 192.0.2.3:80 backup\n",
			"server b1:backup [2001:db8::1]:80 backup disabled\n"},
			[]string{"b1 [2001:db8::1]:80 disabled"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text, err := templates.Get(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			tm, err := NewTemplate(TemplateOptions{Name: tt.name, Files: []File{{Text: text, Dest: filepath.Join(dir, "out")}}})
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string]string{"listen": "127.0.0.1:18080", "stats_socket": filepath.Join(dir, "admin.sock")}
			v, _ := Build(rampSnap(25), ipTopo, "", vars)
			out, err := tm.Render(v)
			if err != nil {
				t.Fatal(err)
			}
			got := string(out[0])
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in:\n%s", w, got)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(got, w) {
					t.Errorf("%q in:\n%s", w, got)
				}
			}
			check(t, tt.name, dir, got)
			v, _ = Build(snap(6, 1, publication.Origin{Name: "a1", Address: "http://192.0.2.1:8080", State: "healthy"}), ipTopo, "", vars)
			out, err = tm.Render(v)
			if err != nil {
				t.Fatal(err)
			}
			if regexp.MustCompile(`server .*weight`).Match(out[0]) || strings.Contains(string(out[0]), "ramping") {
				t.Errorf("weights without a ramp:\n%s", out[0])
			}
		})
	}
}

// check runs nginx -t or haproxy -c on a rendered file, when installed.
func check(t *testing.T, name, dir, conf string) {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		for _, d := range []string{"/usr/sbin", "/usr/local/sbin"} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				bin = filepath.Join(d, name)
			}
		}
	}
	if bin == "" {
		t.Logf("%s not installed: the rendered file is not checked", name)
		return
	}
	path := filepath.Join(dir, name+".conf")
	args := []string{"-c", "-f", path}
	if name == "nginx" {
		inc := filepath.Join(dir, "sites.conf")
		if err := os.WriteFile(inc, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		conf = "error_log stderr;\npid " + filepath.Join(dir, "nginx.pid") + ";\nevents {}\nhttp {\n  access_log off;\n  include " + inc + ";\n}\n"
		args = []string{"-t", "-e", "stderr", "-p", dir, "-c", path}
	}
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Errorf("%s %v: %v\n%s", name, args, err, out)
	}
}

// TestShippedTemplatesBackup: the shipped templates write the next level's
// origins as backup servers (HAProxy: every origin has a server NAME:backup
// with the backup flag, as the runtime driver adds them, enabled for the
// next level's) and, for HAProxy, the other levels' disabled,
// with the health checks and retries that let the edge route around a
// failing level on its own (and, with nginx and haproxy installed, the
// rendered files pass their checks).
func TestShippedTemplatesBackup(t *testing.T) {
	a1 := publication.Origin{Name: "a1", Address: "http://192.0.2.1:8080", State: "healthy"}
	a2 := publication.Origin{Name: "a2", Address: "https://192.0.2.2", State: "healthy"}
	b1 := publication.Origin{Name: "b1", Address: "http://[2001:db8::1]", State: "healthy"}
	c1 := publication.Origin{Name: "c1", Address: "http://192.0.2.3", State: "unknown"}
	for _, tt := range []struct {
		name, template string
		snap           *publication.Snapshot
		want, not      []string
	}{
		{"haproxy level 1", "haproxy", snap(1, 1, a1, a2), []string{
			"server a1 192.0.2.1:8080\n",
			"server b1 [2001:db8::1]:80 disabled\n",
			"server b1:backup [2001:db8::1]:80 backup\n",
			"server c1 192.0.2.3:80 disabled\n",
			"server c1:backup 192.0.2.3:80 backup disabled\n",
			"server a1:backup 192.0.2.1:8080 backup disabled\n",
			"retry-on conn-failure empty-response response-timeout 502 503 504\n",
			"option redispatch 1\n",
			"http-request disable-l7-retry unless METH_GET || METH_HEAD\n",
			"option allbackups\n",
			"http-check send meth HEAD uri / ver HTTP/1.1 hdr host www.example.com\n",
			"default-server check inter 1s fall 2 rise 2 observe layer7 error-limit 1 on-error mark-down\n"},
			[]string{"a1 192.0.2.1:8080 disabled", "server b1 [2001:db8::1]:80\n", "server b1:backup [2001:db8::1]:80 backup disabled"}},
		{"haproxy level 2", "haproxy", snap(2, 2, b1), []string{
			"server b1 [2001:db8::1]:80\n",
			"server c1:backup 192.0.2.3:80 backup\n",
			"server a1 192.0.2.1:8080 disabled\n",
			"server a1:backup 192.0.2.1:8080 backup disabled\n",
			"server a2 192.0.2.2:443 ssl verify required ca-file @system-ca sni str(www.example.com) disabled\n"},
			[]string{"a1:backup 192.0.2.1:8080 backup\n"}},
		{"haproxy level 3", "haproxy", snap(3, 3, c1), []string{
			"server c1 192.0.2.3:80\n",
			"server b1:backup [2001:db8::1]:80 backup\n", // the last level before
			"server a1 192.0.2.1:8080 disabled\n"},
			[]string{"a1:backup 192.0.2.1:8080 backup\n"}},
		{"nginx level 1", "nginx", snap(1, 1, a1, a2), []string{
			"server 192.0.2.1:8080 max_fails=1 fail_timeout=10s;",
			"server [2001:db8::1]:80 backup;",
			"proxy_next_upstream_tries 0;"},
			[]string{"192.0.2.3:80"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text, err := templates.Get(tt.template)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			tm, err := NewTemplate(TemplateOptions{Name: tt.template, Files: []File{{Text: text, Dest: filepath.Join(dir, "out")}}})
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string]string{"listen": "127.0.0.1:18080", "stats_socket": filepath.Join(dir, "admin.sock")}
			v, _ := Build(tt.snap, ipTopo, "", vars)
			out, err := tm.Render(v)
			if err != nil {
				t.Fatal(err)
			}
			got := string(out[0])
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in:\n%s", w, got)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(got, w) {
					t.Errorf("%q in:\n%s", w, got)
				}
			}
			check(t, tt.template, dir, got)
		})
	}
}
