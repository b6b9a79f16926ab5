package config

// The publish "dns" block: the authoritative DNS server.

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

var dnsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "listen", Required: true}, {Name: "zone", Required: true}, {Name: "ttl"},
		{Name: "ns"}, {Name: "ns_addresses"}, {Name: "fail_closed"},
	},
}

func (l *loader) publish(b *hcl.Block) {
	kind := b.Labels[0]
	if kind != "dns" {
		l.add(b.LabelRanges[0], "Unknown publisher kind",
			fmt.Sprintf("Publisher kind %q is not known; the kinds are \"dns\". (Nodes follow the publication through the API without a block.)", kind))
		return
	}
	if l.cfg.DNS != nil {
		l.add(b.DefRange, "Duplicate publish \"dns\" block",
			fmt.Sprintf("A publish \"dns\" block was already declared at %s; merge them.", l.cfg.DNS.DeclRange))
		return
	}
	content, diags := b.Body.Content(dnsSchema)
	l.diags = append(l.diags, diags...)
	d := &DNSPublisher{TTL: 30, DeclRange: b.DefRange}
	l.nonEmpty(content.Attributes, "listen", &d.Listen)
	if attr := content.Attributes["zone"]; attr != nil {
		var z string
		if l.decode(attr, &z) {
			if err := checkHostname(strings.TrimSuffix(z, ".")); err != nil || !strings.HasSuffix(z, ".") {
				l.add(attr.Expr.Range(), "Invalid zone",
					fmt.Sprintf("zone must be a fully qualified DNS name ending in a dot, such as \"cdn.example.net.\"; got %q.", z))
			} else {
				d.Zone = strings.ToLower(z)
			}
		}
	}
	l.integer(content.Attributes, "ttl", 0, &d.TTL)
	if attr := content.Attributes["ns"]; attr != nil {
		var ns []string
		if l.decode(attr, &ns) {
			for _, n := range ns {
				if !strings.HasSuffix(n, ".") || checkHostname(strings.TrimSuffix(n, ".")) != nil {
					l.add(attr.Expr.Range(), "Invalid name server",
						fmt.Sprintf("ns entries must be fully qualified names ending in a dot, such as \"ns1.cdn.example.net.\"; got %q.", n))
					ns = nil
					break
				}
			}
			d.NS = ns
		}
	}
	l.nsAddresses(content.Attributes["ns_addresses"], d)
	l.boolean(content.Attributes, "fail_closed", &d.FailClosed)
	l.cfg.DNS = d
}

// nsAddresses decodes ns_addresses: every key a name of ns inside the
// zone, every value a list of IP addresses. An in-zone name server with no
// address is warned about: resolvers could not reach it.
func (l *loader) nsAddresses(attr *hcl.Attribute, d *DNSPublisher) {
	listed := map[string]bool{}
	for _, n := range d.NS {
		listed[strings.ToLower(n)] = true
	}
	if attr != nil {
		var m map[string][]string
		if !l.decode(attr, &m) {
			return
		}
		out := make(map[string][]string, len(m))
		for name, addrs := range m {
			key := strings.ToLower(name)
			switch {
			case !listed[key]:
				l.add(attr.Expr.Range(), "Invalid name server address",
					fmt.Sprintf("ns_addresses names %q, which is not in ns; list it in ns too, or remove it.", name))
				return
			case d.Zone != "" && !inZone(key, d.Zone):
				l.add(attr.Expr.Range(), "Invalid name server address",
					fmt.Sprintf("%q is outside the zone %s: its addresses come from its own zone, not from this server; remove it from ns_addresses.", name, d.Zone))
				return
			case len(addrs) == 0:
				l.add(attr.Expr.Range(), "Invalid name server address",
					fmt.Sprintf("ns_addresses gives %q no address; give at least one, such as [\"192.0.2.53\"].", name))
				return
			}
			for _, a := range addrs {
				if _, err := netip.ParseAddr(a); err != nil || strings.Contains(a, "%") {
					l.add(attr.Expr.Range(), "Invalid name server address",
						fmt.Sprintf("ns_addresses[%q]: %q is not an IPv4 or IPv6 address.", name, a))
					return
				}
			}
			out[key] = addrs
		}
		d.NSAddresses = out
	}
	if d.Zone == "" {
		return
	}
	for _, n := range d.NS {
		n = strings.ToLower(n)
		if inZone(n, d.Zone) && len(d.NSAddresses[n]) == 0 {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "In-zone name server without an address",
				Detail:   fmt.Sprintf("Name server %s is inside the zone %s but has no address: it would answer NXDOMAIN and resolvers could not reach it. Give its addresses with ns_addresses = { %q = [\"192.0.2.53\"] }.", n, d.Zone, n),
				Subject:  d.DeclRange.Ptr(),
			})
		}
	}
}

// dnsWarnings warns when the DNS TTL outlives a site's detection time
// (unhealthy_threshold x round_interval): resolvers would keep a dead
// answer longer than vigil needs to notice the failure.
func (l *loader) dnsWarnings() {
	d := l.cfg.DNS
	if d == nil {
		return
	}
	ttl := time.Duration(d.TTL) * time.Second
	for _, s := range l.cfg.Sites {
		if !s.HealthCheck.Enabled || !inZone(s.Hostname, d.Zone) {
			continue
		}
		detect := time.Duration(s.HealthCheck.UnhealthyThreshold) * l.cfg.Control.RoundInterval
		if ttl > detect {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "DNS TTL longer than failure detection",
				Detail: fmt.Sprintf("ttl is %s but site %q detects a failure in %s (unhealthy_threshold %d x round_interval %s): resolvers may keep serving a dead origin for up to %s after vigil notices. Lower ttl to %d or less.",
					ttl, s.Name, detect, s.HealthCheck.UnhealthyThreshold, l.cfg.Control.RoundInterval, ttl-detect, int(detect.Seconds())),
				Subject: d.DeclRange.Ptr(),
			})
		}
	}
}

func inZone(host, zone string) bool {
	host = strings.TrimSuffix(host, ".") + "."
	return host == zone || strings.HasSuffix(host, "."+zone)
}
