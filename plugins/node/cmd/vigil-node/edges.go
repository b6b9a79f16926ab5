package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/templates"
	"github.com/vigilcdn/vigil/plugins/node/xds"
)

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

type edgeFlags struct {
	haSocket, haSrvArgs, haTLSArgs, haFallback, haFbCheck, haFbReload string
	templates                                                         []string
	check, reload                                                     string
	minInterval                                                       time.Duration
	// haRemoveAfter and haDrainTimeout are -haproxy-remove-after (0: at
	// the first apply) and -haproxy-drain-timeout (0: never cut).
	haRemoveAfter, haDrainTimeout time.Duration
	// haWatch is -haproxy-watch (0: HAProxy's reloads are caught at the
	// resync only).
	haWatch time.Duration
	// xdsListen, xdsHTTP and xdsCA are -xds-listen (empty: no xDS),
	// -xds-http-listen and -xds-trusted-ca.
	xdsListen, xdsHTTP, xdsCA string
	// varnishAdmin, varnishSecret and varnishProbe are -varnish-admin
	// (empty: no live Varnish), -varnish-secret and -varnish-probe-url.
	varnishAdmin, varnishSecret, varnishProbe string
	// log is vigil-node's logger (nil: the drivers log nothing).
	log hclog.Logger
}

// newHAProxy builds the HAProxy driver; tests replace it to see the
// options the flags gave.
var newHAProxy = edge.NewHAProxy

// haproxyRemoval checks -haproxy-remove-after and -haproxy-drain-timeout
// and turns them into HAProxyOptions.RemoveAfter and DrainTimeout.
func haproxyRemoval(f edgeFlags) (removeAfter, drainTimeout time.Duration, err error) {
	if f.haSocket == "" {
		if f.haRemoveAfter != edge.DefaultHAProxyRemoveAfter || f.haDrainTimeout != 0 {
			return 0, 0, fmt.Errorf("-haproxy-remove-after and -haproxy-drain-timeout need -haproxy-socket: they tune the removal of the servers vigil-node adds through the Runtime API")
		}
		if f.haWatch != edge.DefaultHAProxyWatch {
			return 0, 0, fmt.Errorf("-haproxy-watch needs -haproxy-socket: it is how often vigil-node asks HAProxy's Runtime API whether HAProxy was reloaded")
		}
		return 0, 0, nil
	}
	if f.haWatch < 0 {
		return 0, 0, fmt.Errorf("-haproxy-watch %v: give how often vigil-node asks HAProxy whether it was reloaded (e.g. 100ms), or 0 to leave a reload to -edge-resync", f.haWatch)
	}
	if f.haRemoveAfter < 0 {
		return 0, 0, fmt.Errorf("-haproxy-remove-after %v: give 0 (delete a removed server at the first apply once it is drained) or a positive duration, e.g. 1m", f.haRemoveAfter)
	}
	if f.haDrainTimeout < 0 {
		return 0, 0, fmt.Errorf("-haproxy-drain-timeout %v: give 0 (never cut the sessions of a server being removed: its deletion waits for them) or a positive duration, e.g. 10m", f.haDrainTimeout)
	}
	removeAfter = f.haRemoveAfter
	if removeAfter == 0 {
		removeAfter = -1 // the driver reads 0 as its default, and a negative one as at once
	}
	return removeAfter, f.haDrainTimeout, nil
}

// edgeDrivers builds the edge drivers the flags ask for.
func edgeDrivers(f edgeFlags) ([]edge.Driver, error) {
	var out []edge.Driver
	removeAfter, drainTimeout, err := haproxyRemoval(f)
	if err != nil {
		return nil, err
	}
	if f.haSocket != "" {
		opts := edge.HAProxyOptions{Socket: f.haSocket, ServerArgs: f.haSrvArgs, TLSArgs: f.haTLSArgs,
			RemoveAfter: removeAfter, DrainTimeout: drainTimeout, Watch: f.haWatch}
		if f.haWatch == 0 {
			opts.Watch = -1 // the driver reads 0 as its default, and a negative one as never
		}
		if f.log != nil {
			// Named and keyed like the hub's lines about the same edge.
			opts.Log = f.log.Named("edge").With("edge", "haproxy")
		}
		if f.haFallback != "" {
			if f.haFbReload == "" {
				return nil, fmt.Errorf("-haproxy-fallback needs -haproxy-fallback-reload: the command that reloads HAProxy gracefully (e.g. \"systemctl reload haproxy\")")
			}
			file, _, err := templateFile(f.haFallback)
			if err != nil {
				return nil, fmt.Errorf("-haproxy-fallback: %w", err)
			}
			t, err := edge.NewTemplate(edge.TemplateOptions{Name: "haproxy-fallback", Files: []edge.File{file}, Check: f.haFbCheck, Reload: f.haFbReload, MinInterval: f.minInterval})
			if err != nil {
				return nil, fmt.Errorf("-haproxy-fallback: %w", err)
			}
			opts.Fallback = t
		}
		h, err := newHAProxy(opts)
		if err != nil {
			return nil, fmt.Errorf("-haproxy-socket: %w", err)
		}
		out = append(out, h)
	} else if f.haFallback != "" {
		return nil, fmt.Errorf("-haproxy-fallback needs -haproxy-socket (for a template-only HAProxy, use -template builtin:haproxy:DEST)")
	} else if f.haSrvArgs != edge.DefaultHAProxyServerArgs || f.haTLSArgs != edge.DefaultHAProxyTLSArgs {
		// Without the runtime API no server is added: the arguments would
		// be dropped silently.
		return nil, fmt.Errorf("-haproxy-server-args and -haproxy-tls-args need -haproxy-socket: they are the arguments of the servers vigil-node adds through HAProxy's runtime API (with -template builtin:haproxy:DEST, write them in the template)")
	}
	if len(f.templates) > 0 {
		var files []edge.File
		name := ""
		for _, spec := range f.templates {
			file, n, err := templateFile(spec)
			if err != nil {
				return nil, fmt.Errorf("-template: %w", err)
			}
			if name == "" {
				name = n
			}
			files = append(files, file)
		}
		t, err := edge.NewTemplate(edge.TemplateOptions{Name: name, Files: files, Check: f.check, Reload: f.reload, MinInterval: f.minInterval})
		if err != nil {
			return nil, fmt.Errorf("-template: %w", err)
		}
		out = append(out, t)
	} else if f.check != "" || f.reload != "" {
		return nil, fmt.Errorf("-template-check and -template-reload need -template SRC:DEST")
	}
	if f.varnishAdmin != "" {
		if f.varnishSecret == "" {
			return nil, fmt.Errorf("-varnish-admin needs -varnish-secret FILE: the secret file varnishd's -S names (Debian: /etc/varnish/secret)")
		}
		secret, err := os.ReadFile(f.varnishSecret)
		if err != nil {
			return nil, fmt.Errorf("-varnish-secret: %w (give the secret file varnishd's -S names, readable by vigil-node)", err)
		}
		d, err := edge.NewVarnishAdmin(edge.VarnishAdminOptions{Addr: f.varnishAdmin, Secret: secret, ProbeURL: f.varnishProbe})
		if err != nil {
			return nil, fmt.Errorf("-varnish-admin: %w", err)
		}
		out = append(out, d)
	} else if f.varnishSecret != "" || f.varnishProbe != "" {
		return nil, fmt.Errorf("-varnish-secret and -varnish-probe-url need -varnish-admin host:port: varnishd's management address (its -T)")
	}
	if f.xdsListen != "" {
		opts := xds.Options{Listen: f.xdsListen, HTTPListen: f.xdsHTTP, TrustedCA: f.xdsCA}
		if f.log != nil {
			opts.Log = f.log.Named("edge").With("edge", "xds")
		}
		x, err := xds.New(opts)
		if err != nil {
			return nil, fmt.Errorf("-xds-listen: %w", err)
		}
		out = append(out, x)
	} else if (f.xdsHTTP != "" && f.xdsHTTP != xds.DefaultHTTPListen) || (f.xdsCA != "" && f.xdsCA != xds.DefaultTrustedCA) {
		return nil, fmt.Errorf("-xds-http-listen and -xds-trusted-ca need -xds-listen: they shape what the xDS service serves to Envoy")
	}
	return out, nil
}

// templateFile reads SRC:DEST (SRC a file or builtin:NAME) and names it.
func templateFile(spec string) (edge.File, string, error) {
	var src, dest, name, text string
	if rest, ok := strings.CutPrefix(spec, "builtin:"); ok {
		var found bool
		name, dest, found = strings.Cut(rest, ":")
		if !found || dest == "" {
			return edge.File{}, "", fmt.Errorf("%q: write builtin:NAME:DEST", spec)
		}
		t, err := templates.Get(name)
		if err != nil {
			return edge.File{}, "", err
		}
		text = t
	} else {
		var found bool
		src, dest, found = strings.Cut(spec, ":")
		if !found || src == "" || dest == "" {
			return edge.File{}, "", fmt.Errorf("%q: write SRC:DEST (a template file and the file it renders)", spec)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return edge.File{}, "", err
		}
		text = string(b)
		name, _, _ = strings.Cut(filepath.Base(src), ".")
	}
	return edge.File{Name: filepath.Base(dest), Text: text, Dest: dest, Source: src}, name, nil
}
