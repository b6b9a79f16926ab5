package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

var etcdSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "endpoints", Required: true}, {Name: "prefix"}, {Name: "lease_ttl"}, {Name: "mode"},
		{Name: "dial_timeout"}, {Name: "username_env"}, {Name: "password_env"},
		{Name: "id"}, {Name: "advertise"}, {Name: "max_txn_ops"},
		{Name: "ca_file"}, {Name: "cert_file"}, {Name: "key_file"},
		{Name: "compaction_interval"},
	},
}

// store reads `control { store "etcd" { } }`.
func (l *loader) store(b *hcl.Block) {
	if kind := b.Labels[0]; kind != "etcd" {
		l.add(b.LabelRanges[0], "Unknown store kind",
			fmt.Sprintf("Store kind %q is not known; the kinds are \"etcd\". Remove the block to keep the embedded store in data_dir.", kind))
		return
	}
	if prev := l.cfg.Control.Store; prev != nil {
		l.add(b.DefRange, "Duplicate store block",
			fmt.Sprintf("A store block was already declared at %s; merge them.", prev.DeclRange))
		return
	}
	content, diags := b.Body.Content(etcdSchema)
	l.diags = append(l.diags, diags...)
	a := content.Attributes
	s := &EtcdStore{
		Prefix: DefaultEtcdPrefix, LeaseTTL: DefaultEtcdLeaseTTL, Mode: ModeActiveStandby,
		DialTimeout: DefaultEtcdDialTimeout, MaxTxnOps: DefaultEtcdMaxTxnOps,
		CompactionInterval: DefaultEtcdCompactionInterval, DeclRange: b.DefRange,
	}
	if attr := a["endpoints"]; attr != nil {
		var eps []string
		if l.decode(attr, &eps) {
			if len(eps) == 0 {
				l.add(attr.Expr.Range(), "No etcd endpoints",
					"endpoints must list at least one etcd member, such as [\"127.0.0.1:2379\"].")
			}
			for _, ep := range eps {
				if err := checkEndpoint(ep); err != nil {
					l.add(attr.Expr.Range(), "Invalid etcd endpoint", err.Error())
					eps = nil
					break
				}
			}
			s.Endpoints = eps
		}
	}
	if attr := a["prefix"]; attr != nil {
		var p string
		if l.decode(attr, &p) {
			if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, " \t\n") {
				l.add(attr.Expr.Range(), "Invalid etcd prefix",
					fmt.Sprintf("prefix must start with \"/\", not end with one and hold no spaces, such as \"/vigil\"; got %q.", p))
			} else {
				s.Prefix = p
			}
		}
	}
	if attr := a["lease_ttl"]; attr != nil {
		var ttl time.Duration
		l.duration(a, "lease_ttl", &ttl)
		if ttl != 0 {
			if ttl < 2*time.Second || ttl%time.Second != 0 {
				l.add(attr.Expr.Range(), "Invalid lease_ttl",
					fmt.Sprintf("lease_ttl must be whole seconds, at least \"2s\" (etcd leases count in seconds); got %s.", ttl))
			} else {
				s.LeaseTTL = ttl
			}
		}
	}
	if attr := a["mode"]; attr != nil {
		var m string
		if l.decode(attr, &m) {
			switch m {
			case ModeActiveStandby, ModeSharded:
				s.Mode = m
			default:
				detail := fmt.Sprintf("mode must be %q (one leader probes, the others stand by) or %q (every instance probes its share of the sites); got %q.", ModeActiveStandby, ModeSharded, m)
				if sug := suggest(m, []string{ModeActiveStandby, ModeSharded}); sug != "" {
					detail += fmt.Sprintf(" Did you mean %q?", sug)
				}
				l.add(attr.Expr.Range(), "Invalid store mode", detail)
			}
		}
	}
	l.duration(a, "dial_timeout", &s.DialTimeout)
	l.str(a, "username_env", &s.UsernameEnv)
	l.str(a, "password_env", &s.PasswordEnv)
	if (s.UsernameEnv == "") != (s.PasswordEnv == "") {
		at := a["username_env"]
		if at == nil {
			at = a["password_env"]
		}
		l.add(at.Expr.Range(), "Incomplete etcd credentials",
			"Set both username_env and password_env (names of environment variables), or neither.")
	}
	l.nonEmpty(a, "id", &s.ID)
	if attr := a["advertise"]; attr != nil {
		var adv string
		if l.decode(attr, &adv) {
			if u, err := url.Parse(adv); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				l.add(attr.Expr.Range(), "Invalid advertise URL",
					fmt.Sprintf("advertise must be the http or https URL other instances give for this one's API, such as \"http://10.0.0.5:8470\"; got %q.", adv))
			} else {
				s.Advertise = strings.TrimSuffix(adv, "/")
			}
		}
	}
	l.integer(a, "max_txn_ops", 16, &s.MaxTxnOps)
	l.compactionInterval(a, s)
	l.etcdTLS(a, s)
	l.cfg.Control.Store = s
}

// checkEndpoint accepts "host:port", "http://host:port" or
// "https://host:port".
func checkEndpoint(ep string) error {
	const example = "such as \"127.0.0.1:2379\" or \"https://etcd-1.example.net:2379\""
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
			return fmt.Errorf("endpoint %q is not an etcd client address: write host:port or an http(s) URL with no path, %s", redactEndpoint(ep), example)
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("endpoint %q has no port: write host:port, %s", redactEndpoint(ep), example)
	}
	return nil
}

func redactEndpoint(ep string) string {
	if u, err := url.Parse(ep); err == nil && u.User != nil {
		return u.Redacted()
	}
	return ep
}

// etcdTLS reads the store block's ca_file, cert_file and key_file, checks
// that they load, and that no endpoint says http:// beside them.
func (l *loader) etcdTLS(a hcl.Attributes, s *EtcdStore) {
	path := func(name string, into *string) *hcl.Attribute {
		attr := a[name]
		var p string
		if attr == nil || !l.decode(attr, &p) {
			return nil
		}
		if strings.TrimSpace(p) == "" {
			l.add(attr.Expr.Range(), "Empty "+name, name+" must name a PEM file; remove it to use none.")
			return nil
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(attr.Expr.Range().Filename), p)
		}
		*into = p
		return attr
	}
	caAt := path("ca_file", &s.CAFile)
	certAt := path("cert_file", &s.CertFile)
	keyAt := path("key_file", &s.KeyFile)
	if caAt != nil {
		if _, err := LoadCAPool(s.CAFile); err != nil {
			l.add(caAt.Expr.Range(), "Unusable etcd ca_file", err.Error())
		}
	}
	switch {
	case (certAt == nil) != (keyAt == nil):
		at := certAt
		if at == nil {
			at = keyAt
		}
		l.add(at.Expr.Range(), "Incomplete etcd client certificate", "Set both cert_file and key_file (this instance's client certificate and its key), or neither.")
	case certAt != nil:
		if _, err := LoadKeyPair(s.CertFile, s.KeyFile); err != nil {
			l.add(certAt.Expr.Range(), "Unusable etcd client certificate", err.Error())
		}
	}
	if caAt == nil && certAt == nil {
		return
	}
	for _, ep := range s.Endpoints {
		if strings.HasPrefix(ep, "http://") {
			at := caAt
			if at == nil {
				at = certAt
			}
			l.add(a["endpoints"].Expr.Range(), "Plain http etcd endpoint with TLS",
				fmt.Sprintf("endpoint %q says http://, but %s sets TLS: write https://%s or host:port.", redactEndpoint(ep), at.Name, strings.TrimPrefix(ep, "http://")))
			return
		}
	}
}

// compactionInterval reads the store block's compaction_interval: "0"
// turns compaction off, anything else is at least a second.
func (l *loader) compactionInterval(a hcl.Attributes, s *EtcdStore) {
	attr := a["compaction_interval"]
	if attr == nil {
		return
	}
	var v string
	if !l.decode(attr, &v) {
		return
	}
	if v == "0" {
		s.CompactionInterval = 0
		return
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		l.add(attr.Expr.Range(), "Invalid compaction_interval",
			fmt.Sprintf("%q is not a duration. Write a number with a unit, such as \"5m\", or \"0\" to leave compaction to etcd (--auto-compaction-retention).", v))
	case d < time.Second:
		l.add(attr.Expr.Range(), "Invalid compaction_interval",
			fmt.Sprintf("compaction_interval must be at least \"1s\" (\"5m\" suits most clusters), or \"0\" to leave compaction to etcd (--auto-compaction-retention); got %q.", v))
	default:
		s.CompactionInterval = d
	}
}
