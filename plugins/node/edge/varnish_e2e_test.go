package edge_test

import (
	"context"
	"fmt"
	"os"
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

// varnishReload is where Debian's varnish package puts varnishreload (not
// on PATH).
const varnishReload = "/usr/share/varnish/varnishreload"

// varnishEdge is a varnishd running the shipped VCL template, and the
// template driver that renders it.
type varnishEdge struct {
	listen, vcl string
	tm          *edge.Template
}

// startVarnish renders builtin:varnish for first (with vars), starts
// varnishd on it (as the current user: -j none, in dir, listening and
// administered on loopback) and returns the driver: check by compiling
// the candidate VCL, reload with varnishreload.
func startVarnish(t *testing.T, first []publication.Site, vars map[string]string) *varnishEdge {
	t.Helper()
	bin := peer(t, "varnishd")
	if !fileExists(varnishReload) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing and CI is set: run make deps", varnishReload)
		}
		t.Skipf("%s is missing (Debian's varnish package has it)", varnishReload)
	}
	dir := t.TempDir()
	work, checkWork := filepath.Join(dir, "work"), filepath.Join(dir, "check")
	ve := &varnishEdge{listen: testnet.Addr(t), vcl: filepath.Join(dir, "vigil.vcl")}
	text, err := templates.Get("varnish")
	if err != nil {
		t.Fatal(err)
	}
	ve.tm, err = edge.NewTemplate(edge.TemplateOptions{Name: "varnish", Files: []edge.File{{Text: text, Dest: ve.vcl}},
		Check:  fmt.Sprintf("%s -C -j none -n %s -f %s >/dev/null", bin, checkWork, edge.CandidatePlaceholder),
		Reload: fmt.Sprintf("%s -n %s %s", varnishReload, work, ve.vcl), MinInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := edge.Build(snapshotOf(1, first), nil, "", vars)
	if _, err := ve.tm.Write(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	// No caching (TTL, grace and keep 0): every GET is fetched from an
	// origin, so the answers show which level serves.
	daemon(t, dir, bin, "-F", "-j", "none", "-n", work, "-a", ve.listen, "-T", testnet.Addr(t), "-f", ve.vcl,
		"-s", "malloc,32m", "-t", "0", "-p", "default_grace=0", "-p", "default_keep=0",
		"-p", "thread_pools=1", "-p", "thread_pool_min=10")
	var names []string
	for _, o := range first[0].Origins {
		names = append(names, o.Name)
	}
	waitServing(t, "http://"+ve.listen+"/", names)
	return ve
}

// TestVarnishTemplate: Varnish driven by builtin:varnish, a VCL compiled
// and loaded by varnishreload at each switch, under about 50 GETs a
// second. The switch times are reported, not asserted.
func TestVarnishTemplate(t *testing.T) {
	l := newLevels(t)
	ve := startVarnish(t, l.site(1), nil)
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	a, err := startAgentVars(t, cp, nil, ve.tm)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ve.listen + "/"
	waitServing(t, url, l.names(1))
	// The next level's director holds b1 once the topology is in.
	waitFor(t, func() error {
		b, _ := os.ReadFile(ve.vcl)
		if !strings.Contains(string(b), "# b1, level 2, next level") {
			return fmt.Errorf("no next-level backend yet:\n%s", b)
		}
		return nil
	})
	switchesAt(t, "varnish-template", url, cp, l, switchRounds, 50, 2)
	for _, s := range a.EdgeStatus() {
		if s.Err != nil {
			t.Errorf("edge %s: %v", s.Edge, s.Err)
		}
	}
}

// TestVarnishCoversWindow: with builtin:varnish, when every level-1 origin
// answers 503 or refuses connections, Varnish serves from level 2 on its
// own (retries, then the probes' fallback director) until vigil switches.
func TestVarnishCoversWindow(t *testing.T) {
	for _, mode := range []failMode{answer503, refuse} {
		t.Run(mode.String(), func(t *testing.T) {
			l := newFlakyLevels(t)
			ve := startVarnish(t, l.site(1), nil)
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			if err := cp.SetSites(l.topology()); err != nil {
				t.Fatal(err)
			}
			cp.Publish(l.site(1))
			startAgentResync(t, cp, 10*time.Minute, nil, ve.tm)
			next := func(name string) func(t *testing.T) {
				return func(t *testing.T) {
					waitFor(t, func() error {
						b, _ := os.ReadFile(ve.vcl)
						if !strings.Contains(string(b), "# "+name+", level") || !strings.Contains(string(b), ", next level") {
							return fmt.Errorf("%s is not a next-level backend yet:\n%s", name, b)
						}
						return nil
					})
				}
			}
			next("b1")(t)
			window(t, "varnish-template", "http://"+ve.listen+"/", cp, l, mode, next("a1"), next("b1"))
		})
	}
}

// TestVarnishUnknownHost: a Host no site names gets Varnish's own 421.
func TestVarnishUnknownHost(t *testing.T) {
	l := newLevels(t)
	ve := startVarnish(t, l.site(1), nil)
	url := "http://" + ve.listen + "/"
	waitServing(t, url, l.names(1))
	unknownHost(t, url)
}
