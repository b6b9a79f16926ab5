package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
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

// caddyEdge is a caddy running the shipped Caddyfile template, and the
// template driver that renders it.
type caddyEdge struct {
	listen, file, admin string
	vars                map[string]string
	tm                  *edge.Template
}

// startCaddy renders builtin:caddy for first, starts caddy on it (its
// state in dir, listening and administered on loopback) and returns the
// driver: check with caddy validate, reload with caddy reload through the
// admin API.
func startCaddy(t *testing.T, first []publication.Site) *caddyEdge {
	t.Helper()
	bin := peer(t, "caddy")
	dir := t.TempDir()
	listen, admin := testnet.Addr(t), testnet.Addr(t)
	host, port, _ := strings.Cut(listen, ":")
	ce := &caddyEdge{listen: listen, file: filepath.Join(dir, "Caddyfile"), admin: admin,
		vars: map[string]string{"http_port": port, "bind": host, "admin": admin}}
	// Caddy keeps its data and autosaved configuration under these.
	env := fmt.Sprintf("XDG_DATA_HOME=%s/data XDG_CONFIG_HOME=%s/config", dir, dir)
	text, err := templates.Get("caddy")
	if err != nil {
		t.Fatal(err)
	}
	ce.tm, err = edge.NewTemplate(edge.TemplateOptions{Name: "caddy", Files: []edge.File{{Text: text, Dest: ce.file}},
		Check:  fmt.Sprintf("%s %s validate --config %s --adapter caddyfile", env, bin, edge.CandidatePlaceholder),
		Reload: fmt.Sprintf("%s %s reload --config %s --adapter caddyfile --address %s", env, bin, ce.file, admin), MinInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := edge.Build(snapshotOf(1, first), nil, "", ce.vars)
	if _, err := ce.tm.Write(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	daemon(t, dir, "/usr/bin/env", "XDG_DATA_HOME="+dir+"/data", "XDG_CONFIG_HOME="+dir+"/config",
		bin, "run", "--config", ce.file, "--adapter", "caddyfile")
	var names []string
	for _, o := range first[0].Origins {
		names = append(names, o.Name)
	}
	waitServing(t, "http://"+ce.listen+"/", names)
	return ce
}

// waitNext waits until the configuration Caddy runs (its admin API's
// /config/, not the rendered file, which is written before its reload)
// sends the failed requests (handle_errors) to addr.
func (ce *caddyEdge) waitNext(t *testing.T, addr string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	waitFor(t, func() error {
		resp, err := client.Get("http://" + ce.admin + "/config/")
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		_, errors, _ := strings.Cut(string(b), `"errors"`)
		if !strings.Contains(errors, `"`+addr+`"`) {
			return fmt.Errorf("%s is not the next level in Caddy's configuration yet:\n%s", addr, b)
		}
		return nil
	})
}

// TestCaddyTemplate: Caddy driven by builtin:caddy, reloaded through its
// admin API at each switch, under about 50 GETs a second. The switch
// times are reported, not asserted.
func TestCaddyTemplate(t *testing.T) {
	l := newLevels(t)
	ce := startCaddy(t, l.site(1))
	cp := fakecp.New()
	t.Cleanup(cp.Close)
	if err := cp.SetSites(l.topology()); err != nil {
		t.Fatal(err)
	}
	cp.Publish(l.site(1))
	a, err := startAgentVars(t, cp, ce.vars, ce.tm)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ce.listen + "/"
	waitServing(t, url, l.names(1))
	ce.waitNext(t, strings.TrimPrefix(l.byLevel[2][0].Address, "http://"))
	switchesAt(t, "caddy-template", url, cp, l, switchRounds, 50, 2)
	for _, s := range a.EdgeStatus() {
		if s.Err != nil {
			t.Errorf("edge %s: %v", s.Edge, s.Err)
		}
	}
}

// TestCaddyCoversWindow: with builtin:caddy, when every level-1 origin
// answers 503 or refuses connections, Caddy serves GETs from level 2 on
// its own (handle_errors) until vigil switches.
func TestCaddyCoversWindow(t *testing.T) {
	for _, mode := range []failMode{answer503, refuse} {
		t.Run(mode.String(), func(t *testing.T) {
			l := newFlakyLevels(t)
			ce := startCaddy(t, l.site(1))
			cp := fakecp.New()
			t.Cleanup(cp.Close)
			if err := cp.SetSites(l.topology()); err != nil {
				t.Fatal(err)
			}
			cp.Publish(l.site(1))
			a := startAgentResync(t, cp, 10*time.Minute, ce.vars, ce.tm)
			ce.waitNext(t, l.b1.addr)
			window(t, "caddy-template", "http://"+ce.listen+"/", a, cp, l, mode,
				func(t *testing.T) { ce.waitNext(t, l.one[0].addr) }, func(t *testing.T) { ce.waitNext(t, l.b1.addr) })
		})
	}
}

// TestCaddyUnknownHost: a Host no site names gets Caddy's own 421.
func TestCaddyUnknownHost(t *testing.T) {
	l := newLevels(t)
	ce := startCaddy(t, l.site(1))
	url := "http://" + ce.listen + "/"
	waitServing(t, url, l.names(1))
	unknownHost(t, url)
}
