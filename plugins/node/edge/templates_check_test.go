package edge_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/templates"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// checkedViews are the Views every shipped template must render into a
// configuration its edge accepts: the usual two levels, a failback ramp,
// a current level with no origin (the next one serves), no origin at all,
// no site, and https and IPv6 origins.
func checkedViews() map[string]*edge.View {
	topo := edge.Topology{"www": {
		{Name: "a1", Address: "http://127.0.0.1:8081", Level: 1, State: "healthy"},
		{Name: "a2", Address: "http://127.0.0.1:8082", Level: 1, State: "healthy"},
		{Name: "b1", Address: "http://[::1]:8083", Level: 2, State: "healthy"},
	}}
	a := []publication.Origin{{Name: "a1", Address: "http://127.0.0.1:8081", State: "healthy"}, {Name: "a2", Address: "http://127.0.0.1:8082", State: "healthy"}}
	b := []publication.Origin{{Name: "b1", Address: "http://[::1]:8083", State: "healthy"}}
	site := func(level int, origins []publication.Origin) publication.Site {
		return publication.Site{Name: "www", Hostname: "www.example.com", Level: level, Origins: origins}
	}
	ramp := site(1, a)
	ramp.Ramp = &publication.Ramp{Weight: 25, From: 2, FromOrigins: b}
	https := site(1, []publication.Origin{{Name: "s1", Address: "https://127.0.0.1:8443", State: "healthy"}})
	https.Name, https.Hostname = "secure", "secure.example.com"
	build := func(sites ...publication.Site) *edge.View {
		v, _ := edge.Build(&publication.Snapshot{Version: 7, Sites: sites}, topo, "", map[string]string{"listen": "127.0.0.1:8080", "http_port": "8080", "bind": "127.0.0.1", "admin": "127.0.0.1:2999"})
		return v
	}
	return map[string]*edge.View{
		"two levels":               build(site(1, a)),
		"level 2 current":          build(site(2, b)),
		"ramp":                     build(ramp),
		"no current origin":        build(site(1, nil)),
		"no origin at all":         build(publication.Site{Name: "lone", Hostname: "lone.example.com", Level: 1}),
		"no site":                  build(),
		"an https site beside www": build(site(1, a), https),
	}
}

// TestShippedTemplatesAccepted: each shipped template, rendered from every
// checked View, is accepted by the real edge (varnishd -C, caddy validate,
// nginx -t).
func TestShippedTemplatesAccepted(t *testing.T) {
	edges := []struct {
		name, bin string
		check     func(t *testing.T, bin, dir, file string) ([]byte, error)
	}{
		{"varnish", "varnishd", func(t *testing.T, bin, dir, file string) ([]byte, error) {
			return exec.Command(bin, "-C", "-j", "none", "-n", filepath.Join(dir, "work"), "-f", file).CombinedOutput()
		}},
		{"caddy", "caddy", func(t *testing.T, bin, dir, file string) ([]byte, error) {
			cmd := exec.Command(bin, "validate", "--config", file, "--adapter", "caddyfile")
			cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir+"/data", "XDG_CONFIG_HOME="+dir+"/config")
			return cmd.CombinedOutput()
		}},
		{"nginx", "nginx", func(t *testing.T, bin, dir, file string) ([]byte, error) {
			conf := filepath.Join(dir, "nginx.conf")
			writeFile(t, conf, nginxConfig(dir, "1", 64, "    include "+file+";"))
			return exec.Command(bin, "-p", dir, "-c", conf, "-e", dir+"/error.log", "-t", "-q").CombinedOutput()
		}},
	}
	for _, e := range edges {
		t.Run(e.name, func(t *testing.T) {
			bin := peer(t, e.bin)
			text, err := templates.Get(e.name)
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range checkedViews() {
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					file := filepath.Join(dir, "rendered")
					tm, err := edge.NewTemplate(edge.TemplateOptions{Name: e.name, Files: []edge.File{{Text: text, Dest: file}}})
					if err != nil {
						t.Fatal(err)
					}
					out, err := tm.Render(v)
					if err != nil {
						t.Fatal(err)
					}
					writeFile(t, file, string(out[0]))
					if msg, err := e.check(t, bin, dir, file); err != nil {
						t.Fatalf("%s refused the rendered file: %v\n%s\nthe file:\n%s", e.bin, err, tail(msg), out[0])
					}
				})
			}
		})
	}
}

// TestVarnishTemplateRamp: during a failback ramp the VCL's current
// director is a weighted random one over both levels' origins.
func TestVarnishTemplateRamp(t *testing.T) {
	text, err := templates.Get("varnish")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := edge.NewTemplate(edge.TemplateOptions{Name: "varnish", Files: []edge.File{{Text: text, Dest: filepath.Join(t.TempDir(), "v.vcl")}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := tm.Render(checkedViews()["ramp"])
	if err != nil {
		t.Fatal(err)
	}
	vcl := string(out[0])
	for _, want := range []string{
		"new vigil_0_cur = directors.random();",
		"vigil_0_cur.add_backend(vigil_0_cur_0, 25);",
		"vigil_0_cur.add_backend(vigil_0_cur_1, 25);",
		"vigil_0_cur.add_backend(vigil_0_from_0, 150);",
	} {
		if !strings.Contains(vcl, want) {
			t.Errorf("no %q in the ramp's VCL:\n%s", want, vcl)
		}
	}
}

// tail is the last 2000 bytes of a command's output.
func tail(b []byte) string {
	if len(b) > 2000 {
		return fmt.Sprintf("...%s", b[len(b)-2000:])
	}
	return string(b)
}
