package edge_test

import (
	"context"
	"fmt"
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

// varnishReload is where Debian's varnish package puts varnishreload (not
// on PATH).
const varnishReload = "/usr/share/varnish/varnishreload"

// varnishEdge is a varnishd running the shipped VCL template, and the
// template driver that renders it.
type varnishEdge struct {
	listen, vcl, work string
	tm                *edge.Template
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
	ve := &varnishEdge{listen: testnet.Addr(t), vcl: filepath.Join(dir, "vigil.vcl"), work: work}
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

// activeVCL is the source of the VCL varnishd is using: what a test checks,
// rather than the rendered file, which is written before its reload.
func (ve *varnishEdge) activeVCL() (string, error) {
	out, err := exec.Command("varnishadm", "-n", ve.work, "vcl.list").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("varnishadm vcl.list: %w: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "active" {
			src, err := exec.Command("varnishadm", "-n", ve.work, "vcl.show", f[len(f)-1]).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("varnishadm vcl.show: %w: %s", err, src)
			}
			return string(src), nil
		}
	}
	return "", fmt.Errorf("no active VCL in:\n%s", out)
}

// waitNext waits until the VCL in use has origin name in the next level.
func (ve *varnishEdge) waitNext(t *testing.T, name string) {
	t.Helper()
	waitFor(t, func() error {
		src, err := ve.activeVCL()
		if err != nil {
			return err
		}
		if !strings.Contains(src, "# "+name+", level "+levelOf(name)+", next level") {
			return fmt.Errorf("%s is not in the next level of the VCL in use yet:\n%s", name, src)
		}
		return nil
	})
}

// levelOf is the level of a test origin (a1, a2: 1; b1: 2).
func levelOf(name string) string {
	if strings.HasPrefix(name, "a") {
		return "1"
	}
	return "2"
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
	ve.waitNext(t, "b1")
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
			a := startAgentResync(t, cp, 10*time.Minute, nil, ve.tm)
			ve.waitNext(t, "b1")
			window(t, "varnish-template", "http://"+ve.listen+"/", a, cp, l, mode,
				func(t *testing.T) { ve.waitNext(t, "a1") }, func(t *testing.T) { ve.waitNext(t, "b1") })
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
