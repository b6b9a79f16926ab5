// Package templates holds the edge templates vigil-node ships, for its
// template mode (-template builtin:NAME:DEST): nginx.conf.tmpl (an
// http-level include: an upstream per site, the next level as backup
// servers, a server block per hostname, and a default server answering
// 421 to any other Host), varnish.vcl.tmpl (a whole VCL: a backend per
// origin, a round-robin director per level and a fallback director to the
// next level, probes, and retries of GET and HEAD), caddy.Caddyfile.tmpl
// (a whole Caddyfile: a site per hostname whose current level's origins
// are health-checked and whose GETs and HEADs that fail go to the next
// level in handle_errors) and haproxy.cfg.tmpl (a whole
// haproxy.cfg: one backend per site, a stats socket at level admin for the
// runtime driver, the next level's origins as backup servers and the other
// levels' as disabled servers, every server checked and observed, and GET
// and HEAD retried on another server), and trafficserver-parent.config.tmpl
// with trafficserver-remap.config.tmpl (Apache Traffic Server's
// parent.config and remap.config, to be used together: a map rule per
// site, and a parent rule whose parents are the current level's origins,
// taken in turn, or, with the var consistent_hash=on and during a ramp,
// hashed with the next level as secondary parents). During a
// failback ramp both write the two levels' servers with their weights
// (Site.Ramp and Origin.Weight of the View). They are
// Go text/templates executed with an *edge.View; the package documentation
// of plugins/node/edge and plugins/node/README.md say what a View holds.
package templates

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.tmpl
var files embed.FS

// Get returns the shipped template NAME ("nginx", "haproxy", "varnish",
// "caddy", "trafficserver-parent" or "trafficserver-remap").
func Get(name string) (string, error) {
	b, err := files.ReadFile(name + tmplExt(name))
	if err != nil {
		return "", fmt.Errorf("no shipped template %q: the shipped ones are %s", name, strings.Join(Names(), ", "))
	}
	return string(b), nil
}

func tmplExt(name string) string {
	switch name {
	case "nginx":
		return ".conf.tmpl"
	case "haproxy":
		return ".cfg.tmpl"
	case "varnish":
		return ".vcl.tmpl"
	case "caddy":
		return ".Caddyfile.tmpl"
	case "trafficserver-parent", "trafficserver-remap":
		return ".config.tmpl"
	}
	return ".tmpl"
}

// Names lists the shipped templates.
func Names() []string {
	var out []string
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		n, _, _ := strings.Cut(e.Name(), ".")
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
