package config

// The publish "dns" block: the authoritative DNS server.

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

var dnsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "listen", Required: true}, {Name: "zone", Required: true}, {Name: "ttl"},
		{Name: "ns"}, {Name: "fail_closed"},
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
	l.boolean(content.Attributes, "fail_closed", &d.FailClosed)
	l.cfg.DNS = d
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
