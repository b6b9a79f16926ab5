package edge_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/internal/fakecp"
)

// liveVarnish is a varnishd booted on a VCL with no backend, its
// management port on loopback with a secret.
type liveVarnish struct {
	listen, admin, work string
	secret              []byte
}

func startLiveVarnish(t *testing.T) *liveVarnish {
	t.Helper()
	bin := peer(t, "varnishd")
	peer(t, "varnishadm")
	dir := t.TempDir()
	lv := &liveVarnish{listen: testnet.Addr(t), admin: testnet.Addr(t), work: filepath.Join(dir, "work"),
		secret: []byte("vigil-test-secret-" + t.Name() + "\n")}
	secret, boot := filepath.Join(dir, "secret"), filepath.Join(dir, "boot.vcl")
	writeFile(t, secret, string(lv.secret))
	writeFile(t, boot, "vcl 4.1;\nbackend default none;\n")
	daemon(t, dir, bin, "-F", "-j", "none", "-n", lv.work, "-a", lv.listen, "-T", lv.admin, "-S", secret, "-f", boot,
		"-s", "malloc,32m", "-t", "0", "-p", "default_grace=0", "-p", "default_keep=0",
		"-p", "thread_pools=1", "-p", "thread_pool_min=10")
	return lv
}

// active is the name and source of the VCL varnishd uses.
func (lv *liveVarnish) active() (name, src string, err error) {
	out, err := exec.Command("varnishadm", "-n", lv.work, "vcl.list").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("varnishadm vcl.list: %w: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "active" {
			name = f[len(f)-1]
			b, err := exec.Command("varnishadm", "-n", lv.work, "vcl.show", name).CombinedOutput()
			if err != nil {
				return "", "", fmt.Errorf("varnishadm vcl.show: %w: %s", err, b)
			}
			return name, string(b), nil
		}
	}
	return "", "", fmt.Errorf("no active VCL in:\n%s", out)
}

// TestVarnishAdminSwitchesWithoutVCL: the live driver loads one VCL with
// both levels, then switches levels under about 300 GETs a second with
// backend.set_health alone: the VCL in use stays the same one through
// every failover and failback. The switch times are reported, not
// asserted.
func TestVarnishAdminSwitchesWithoutVCL(t *testing.T) {
	lv := startLiveVarnish(t)
	d, err := edge.NewVarnishAdmin(edge.VarnishAdminOptions{Addr: lv.admin, Secret: lv.secret, Timeout: time.Minute})
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
	a, err := startAgentVars(t, cp, nil, d)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + lv.listen + "/"
	waitServing(t, url, l.names(1))
	var loaded string
	waitFor(t, func() error {
		name, src, err := lv.active()
		if err != nil {
			return err
		}
		if !strings.Contains(src, "# b1, level 2") {
			return fmt.Errorf("level 2 is not in the VCL in use yet:\n%s", src)
		}
		loaded = name
		return nil
	})
	switches(t, "varnish-admin", url, cp, l, switchRounds)
	name, _, err := lv.active()
	if err != nil {
		t.Fatal(err)
	}
	if name != loaded {
		t.Errorf("the VCL in use changed from %s to %s: a level switch loaded a VCL", loaded, name)
	}
	for _, s := range a.EdgeStatus() {
		if s.Err != nil {
			t.Errorf("edge %s: %v", s.Edge, s.Err)
		}
	}
}

// TestVarnishAdminErrors: a wrong secret and an address where no varnishd
// listens fail with an error that says so; empty options are refused.
func TestVarnishAdminErrors(t *testing.T) {
	lv := startLiveVarnish(t)
	for _, tt := range []struct {
		name string
		opts edge.VarnishAdminOptions
		want string
	}{
		{"no address", edge.VarnishAdminOptions{Secret: []byte("x")}, "-T host:port"},
		{"no secret", edge.VarnishAdminOptions{Addr: lv.admin}, "-S"},
		{"wrong secret", edge.VarnishAdminOptions{Addr: lv.admin, Secret: []byte("wrong\n"), Timeout: time.Minute}, "refused the secret"},
		{"nothing listens", edge.VarnishAdminOptions{Addr: testnet.Addr(t), Secret: []byte("x"), Timeout: time.Minute}, "connecting to the management port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := edge.NewVarnishAdmin(tt.opts)
			if err == nil {
				v, _ := edge.Build(snapshotOf(1, newLevels(t).site(1)), nil, "", nil)
				waitFor(t, func() error {
					_, err = d.Apply(context.Background(), v)
					if err != nil && strings.Contains(err.Error(), "connecting") && tt.name != "nothing listens" {
						return err // varnishd is still starting
					}
					return nil
				})
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one that says %q", err, tt.want)
			}
		})
	}
}

// TestVarnishAdminViewsAccepted: the driver's VCL for every checked View
// (two levels, a ramp, no current origin, no origin, no site, https and
// IPv6 origins) is compiled and used by the real varnishd, and its
// backends' health set; the VCLs it used before are discarded.
func TestVarnishAdminViewsAccepted(t *testing.T) {
	lv := startLiveVarnish(t)
	d, err := edge.NewVarnishAdmin(edge.VarnishAdminOptions{Addr: lv.admin, Secret: lv.secret, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	views := checkedViews()
	// varnishd may still be starting: the first Apply waits for it.
	waitFor(t, func() error { _, err := d.Apply(context.Background(), views["two levels"]); return err })
	for name, v := range views {
		t.Run(name, func(t *testing.T) {
			if _, err := d.Apply(context.Background(), v); err != nil {
				t.Fatal(err)
			}
			_, src, err := lv.active()
			if err != nil {
				t.Fatal(err)
			}
			if v.Sites != nil && v.Sites[0].Ramp != nil && !strings.Contains(src, "directors.random()") {
				t.Errorf("no weighted director during the ramp:\n%s", src)
			}
		})
	}
	// The driver's earlier VCLs are discarded: one of its own is left.
	out, err := exec.Command("varnishadm", "-n", lv.work, "vcl.list").CombinedOutput()
	if err != nil {
		t.Fatalf("varnishadm vcl.list: %v: %s", err, out)
	}
	if n := strings.Count(string(out), " vigil_"); n != 1 {
		t.Errorf("%d VCLs of the driver are loaded, want 1:\n%s", n, out)
	}
}

// TestVarnishAdminCoversWindow: with the live driver, when every level-1
// origin answers 503 or refuses connections, Varnish serves GETs from
// level 2 on its own (retries on the next healthy level, then the probes'
// fallback director) until vigil switches.
func TestVarnishAdminCoversWindow(t *testing.T) {
	for _, mode := range []failMode{answer503, refuse} {
		t.Run(mode.String(), func(t *testing.T) {
			lv := startLiveVarnish(t)
			d, err := edge.NewVarnishAdmin(edge.VarnishAdminOptions{Addr: lv.admin, Secret: lv.secret, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			l := newFlakyLevels(t)
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			if err := cp.SetSites(l.topology()); err != nil {
				t.Fatal(err)
			}
			cp.Publish(l.site(1))
			a := startAgentResync(t, cp, 10*time.Minute, nil, d)
			waitFor(t, func() error {
				_, src, err := lv.active()
				if err != nil {
					return err
				}
				if !strings.Contains(src, "# b1, level 2") {
					return fmt.Errorf("level 2 is not in the VCL in use yet:\n%s", src)
				}
				return nil
			})
			window(t, "varnish-admin", "http://"+lv.listen+"/", a, cp, l, mode, nil, nil)
		})
	}
}
