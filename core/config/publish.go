package config

// The publish "dns" block: the authoritative DNS server.

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

var dnsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "listen", Required: true}, {Name: "zone", Required: true}, {Name: "ttl"},
		{Name: "ns"}, {Name: "ns_addresses"}, {Name: "fail_closed"}, {Name: "transition_ttl"},
		{Name: "rname"}, {Name: "soa_refresh"}, {Name: "soa_retry"}, {Name: "soa_expire"},
		{Name: "allow_transfer"}, {Name: "notify"},
		{Name: "tsig_key"}, {Name: "tsig_algorithm"}, {Name: "tsig_secret_env"},
		{Name: "rrl_rate"}, {Name: "rrl_slip"}, {Name: "rrl_exempt"},
	},
}

var dnsUpdateSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "server", Required: true}, {Name: "zone", Required: true}, {Name: "ttl"}, {Name: "transition_ttl"},
		{Name: "tsig_key"}, {Name: "tsig_algorithm"}, {Name: "tsig_secret_env"}, {Name: "timeout"},
	},
}

func (l *loader) publish(b *hcl.Block) {
	kind := b.Labels[0]
	if kind == "dns_update" {
		l.dnsUpdate(b)
		return
	}
	if kind != "dns" {
		l.add(b.LabelRanges[0], "Unknown publisher kind",
			fmt.Sprintf("Publisher kind %q is not known; the kinds are \"dns\" and \"dns_update\". (Nodes follow the publication through the API without a block.)", kind))
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
	// The seed's rule: 30 s when settled, 15 s during a failover.
	d.TransitionTTL = d.TTL / 2
	l.integer(content.Attributes, "transition_ttl", 1, &d.TransitionTTL)
	if d.TransitionTTL > d.TTL {
		l.add(content.Attributes["transition_ttl"].Expr.Range(), "Invalid transition_ttl",
			fmt.Sprintf("transition_ttl (%d) is the TTL while a site moves, and must not be longer than ttl (%d); lower it, or remove it for half of ttl.", d.TransitionTTL, d.TTL))
	}
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
	l.hiddenPrimary(content.Attributes, d)
	l.rrl(content.Attributes, d)
	l.cfg.DNS = d
}

// Response rate limiting defaults: NSD's rate, BIND's and NSD's slip, and
// loopback clients exempt.
var (
	DefaultRRLRate   = 200
	DefaultRRLSlip   = 2
	DefaultRRLExempt = []string{"127.0.0.0/8", "::1/128"}
)

// rrl decodes response rate limiting: rrl_rate, rrl_slip, rrl_exempt.
func (l *loader) rrl(attrs hcl.Attributes, d *DNSPublisher) {
	d.RRLRate, d.RRLSlip, d.RRLExempt = DefaultRRLRate, DefaultRRLSlip, slices.Clone(DefaultRRLExempt)
	l.integer(attrs, "rrl_rate", 0, &d.RRLRate)
	l.integer(attrs, "rrl_slip", 0, &d.RRLSlip)
	if attr := attrs["rrl_exempt"]; attr != nil {
		var list []string
		if l.decode(attr, &list) {
			for _, a := range list {
				if _, err := ParsePrefix(a); err != nil {
					l.add(attr.Expr.Range(), "Invalid rrl_exempt entry",
						fmt.Sprintf("rrl_exempt entries are IP addresses or prefixes, such as \"192.0.2.0/24\" or \"2001:db8::/56\"; got %q.", a))
					return
				}
			}
			d.RRLExempt = list
		}
	}
}

// TSIG algorithms a publish "dns" block accepts, by their HCL spelling.
var tsigAlgorithms = []string{"hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"}

// hiddenPrimary decodes the SOA's rname and timers, and what a hidden
// primary needs: allow_transfer, notify and the TSIG key.
func (l *loader) hiddenPrimary(attrs hcl.Attributes, d *DNSPublisher) {
	d.SOARefresh, d.SOARetry, d.SOAExpire = 3600, 600, 604800
	if attr := attrs["rname"]; attr != nil {
		var r string
		if l.decode(attr, &r) {
			name, err := RNameDomain(r)
			if err != nil {
				l.add(attr.Expr.Range(), "Invalid rname", err.Error())
			} else {
				d.RName = name
			}
		}
	}
	l.integer(attrs, "soa_refresh", 1, &d.SOARefresh)
	l.integer(attrs, "soa_retry", 1, &d.SOARetry)
	l.integer(attrs, "soa_expire", 1, &d.SOAExpire)
	if attr := attrs["allow_transfer"]; attr != nil {
		var list []string
		if l.decode(attr, &list) {
			for _, a := range list {
				if _, err := ParsePrefix(a); err != nil {
					l.add(attr.Expr.Range(), "Invalid allow_transfer entry",
						fmt.Sprintf("allow_transfer entries are IP addresses or prefixes, such as \"192.0.2.53\" or \"192.0.2.0/24\"; got %q.", a))
					list = nil
					break
				}
			}
			d.AllowTransfer = list
		}
	}
	if attr := attrs["notify"]; attr != nil {
		var list []string
		if l.decode(attr, &list) {
			for _, a := range list {
				host, port, err := net.SplitHostPort(a)
				if _, perr := netip.ParseAddr(host); err != nil || perr != nil || port == "" {
					l.add(attr.Expr.Range(), "Invalid notify entry",
						fmt.Sprintf("notify entries are a secondary's IP address and port, such as \"192.0.2.53:53\" or \"[2001:db8::53]:53\"; got %q.", a))
					list = nil
					break
				}
			}
			d.Notify = list
		}
	}
	d.TSIGKey, d.TSIGAlgorithm, d.TSIGSecretEnv = l.tsig(attrs, d.DeclRange)
	if len(d.Notify) > 0 && len(d.AllowTransfer) == 0 {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "NOTIFY without transfers",
			Detail:   "notify tells secondaries that the zone changed, but allow_transfer is empty, so they cannot transfer it. Add the secondaries' addresses to allow_transfer.",
			Subject:  d.DeclRange.Ptr(),
		})
	}
}

// RNameDomain turns an SOA rname written as a mailbox
// ("hostmaster@example.net", a dot in the local part escaped) or as a
// fully qualified domain name ("hostmaster.example.net.") into the domain
// name form the SOA carries.
func RNameDomain(r string) (string, error) {
	if local, domain, ok := strings.Cut(r, "@"); ok {
		domain = strings.TrimSuffix(domain, ".")
		if local == "" || strings.ContainsAny(local, " \\") || checkHostname(domain) != nil {
			return "", fmt.Errorf("rname %q is not a mailbox such as \"hostmaster@example.net\"", r)
		}
		return strings.ToLower(strings.ReplaceAll(local, ".", "\\.") + "." + domain + "."), nil
	}
	if !strings.HasSuffix(r, ".") || checkHostname(strings.TrimSuffix(r, ".")) != nil {
		return "", fmt.Errorf("rname must be a mailbox, such as \"hostmaster@example.net\", or a fully qualified name ending in a dot, such as \"hostmaster.example.net.\"; got %q", r)
	}
	return strings.ToLower(r), nil
}

// ParsePrefix reads an IP prefix ("192.0.2.0/24") or a bare address (a
// prefix of its full length).
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
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
	if d := l.cfg.DNS; d != nil {
		l.ttlWarnings(`publish "dns"`, d.TTL, d.Zone, d.DeclRange)
	}
	if d := l.cfg.DNSUpdate; d != nil {
		l.ttlWarnings(`publish "dns_update"`, d.TTL, d.Zone, d.DeclRange)
	}
}

// ttlWarnings warns, for the block named block, when ttl outlives the
// detection time of a site in zone, naming the detection time computed.
func (l *loader) ttlWarnings(block string, ttlSeconds int, zone string, decl hcl.Range) {
	ttl := time.Duration(ttlSeconds) * time.Second
	for _, s := range l.cfg.Sites {
		if !s.HealthCheck.Enabled || !inZone(s.Hostname, zone) {
			continue
		}
		detect := time.Duration(s.HealthCheck.UnhealthyThreshold) * l.cfg.Control.RoundInterval
		if ttl > detect {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "DNS TTL longer than failure detection",
				Detail: fmt.Sprintf("%s: ttl is %s but site %q detects a failure in %s (unhealthy_threshold %d x round_interval %s): resolvers may keep serving a dead origin for up to %s after vigil notices. Lower ttl to %d or less.",
					block, ttl, s.Name, detect, s.HealthCheck.UnhealthyThreshold, l.cfg.Control.RoundInterval, ttl-detect, int(detect.Seconds())),
				Subject: decl.Ptr(),
			})
		}
	}
}

func inZone(host, zone string) bool {
	host = strings.TrimSuffix(host, ".") + "."
	return host == zone || strings.HasSuffix(host, "."+zone)
}

// tsig decodes tsig_key, tsig_algorithm (hmac-sha256 by default) and
// tsig_secret_env, which go together.
func (l *loader) tsig(attrs hcl.Attributes, decl hcl.Range) (key, algo, env string) {
	if attr := attrs["tsig_key"]; attr != nil {
		var k string
		if l.decode(attr, &k) {
			if !strings.HasSuffix(k, ".") || checkHostname(strings.TrimSuffix(k, ".")) != nil {
				l.add(attr.Expr.Range(), "Invalid tsig_key",
					fmt.Sprintf("tsig_key is the key's name, fully qualified (ending in a dot), such as \"vigil-xfr.\"; got %q.", k))
			} else {
				key = strings.ToLower(k)
			}
		}
	}
	algo = "hmac-sha256"
	if attr := attrs["tsig_algorithm"]; attr != nil {
		var a string
		if l.decode(attr, &a) {
			a = strings.ToLower(strings.TrimSuffix(a, "."))
			if !slices.Contains(tsigAlgorithms, a) {
				l.add(attr.Expr.Range(), "Invalid tsig_algorithm",
					fmt.Sprintf("tsig_algorithm must be one of %s; got %q.", strings.Join(tsigAlgorithms, ", "), a))
			} else {
				algo = a
			}
		}
	}
	l.nonEmptyIf(attrs, "tsig_secret_env", &env)
	if (key == "") != (env == "") {
		l.add(decl, "Incomplete TSIG key",
			"tsig_key and tsig_secret_env go together: tsig_key names the key, tsig_secret_env the environment variable holding its base64 secret. Set both, or neither.")
	}
	return key, algo, env
}

// dnsUpdate decodes a publish "dns_update" block.
func (l *loader) dnsUpdate(b *hcl.Block) {
	if l.cfg.DNSUpdate != nil {
		l.add(b.DefRange, "Duplicate publish \"dns_update\" block",
			fmt.Sprintf("A publish \"dns_update\" block was already declared at %s; merge them.", l.cfg.DNSUpdate.DeclRange))
		return
	}
	content, diags := b.Body.Content(dnsUpdateSchema)
	l.diags = append(l.diags, diags...)
	d := &DNSUpdatePublisher{TTL: 30, Timeout: 5 * time.Second, DeclRange: b.DefRange}
	if attr := content.Attributes["server"]; attr != nil {
		var srv string
		if l.decode(attr, &srv) {
			host, port, err := net.SplitHostPort(srv)
			if _, perr := netip.ParseAddr(host); err != nil || perr != nil || port == "" {
				l.add(attr.Expr.Range(), "Invalid server",
					fmt.Sprintf("server is the primary's IP address and port, such as \"192.0.2.53:53\"; got %q.", srv))
			} else {
				d.Server = srv
			}
		}
	}
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
	d.TransitionTTL = d.TTL / 2
	l.integer(content.Attributes, "transition_ttl", 1, &d.TransitionTTL)
	if d.TransitionTTL > d.TTL {
		l.add(content.Attributes["transition_ttl"].Expr.Range(), "Invalid transition_ttl",
			fmt.Sprintf("transition_ttl (%d) is the TTL while a site moves, and must not be longer than ttl (%d); lower it, or remove it for half of ttl.", d.TransitionTTL, d.TTL))
	}
	d.TSIGKey, d.TSIGAlgorithm, d.TSIGSecretEnv = l.tsig(content.Attributes, d.DeclRange)
	l.duration(content.Attributes, "timeout", &d.Timeout)
	l.cfg.DNSUpdate = d
}
