package config

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

var healthCheckSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "enabled"}, {Name: "path"}, {Name: "timeout"}, {Name: "unhealthy_threshold"},
		{Name: "healthy_threshold"}, {Name: "user_agent"}, {Name: "expected_status"},
		{Name: "expected_body"}, {Name: "max_latency"},
		{Name: "ca_file"}, {Name: "tls_server_name"}, {Name: "insecure_skip_tls_verify"},
		{Name: "headers"}, {Name: "follow_redirects"}, {Name: "max_body"},
		{Name: "quarantine"}, {Name: "failback_dwell"}, {Name: "confirm_interval"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "flap"}, {Type: "ramp"}},
}

// rampSchema is health_check { ramp { ... } }: the failback ramp.
var rampSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "steps", Required: true}, {Name: "interval", Required: true}},
}

// flapSchema is health_check { flap { ... } }: flap damping.
var flapSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "changes", Required: true}, {Name: "within", Required: true}},
}

// AntiFlap is a site's anti-flap settings (docs/antiflap.md), from its
// health_check block. A zero field is a rule that is off; a site with none
// of them has no AntiFlap at all (HealthCheck.AntiFlap nil).
type AntiFlap struct {
	// Quarantine: an origin that became unhealthy is not shown healthy
	// again before it has passed.
	Quarantine time.Duration
	// FailbackDwell: the least time on a level before an automatic
	// failback leaves it.
	FailbackDwell time.Duration
	// FlapChanges and FlapWithin: more than FlapChanges state changes
	// within FlapWithin hold the origin unhealthy until it has been stable
	// for FlapWithin.
	FlapChanges int
	FlapWithin  time.Duration
	// Ramp is the failback ramp (docs/antiflap.md#failback-ramp); nil for
	// none: an automatic failback moves all traffic at once.
	Ramp *Ramp
}

// Ramp is health_check { ramp { steps, interval } }: an automatic failback
// sends Steps[0] per cent of new requests to the recovering level, and one
// step more each Interval while that level stays healthy, up to 100.
type Ramp struct {
	// Steps are per cents, ascending, each from 1 to 100, the last 100.
	Steps []int
	// Interval is the least time between two steps.
	Interval time.Duration
}

// MaxBodyLimit bounds max_body.
const MaxBodyLimit = 1 << 30

// refusedHeaders are the request headers health_check { headers } may not
// set: the probe sets them itself, or they would change how the exchange
// is framed.
var refusedHeaders = []string{"Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Connection",
	"Upgrade", "Te", "Trailer", "Keep-Alive", "Proxy-Connection"}

func (l *loader) defaultHealthCheck() *HealthCheck {
	if l.defaultHC == nil {
		l.defaultHC = &HealthCheck{
			Enabled: true, Path: DefaultHealthPath, Timeout: DefaultProbeTimeout,
			UnhealthyThreshold: DefaultUnhealthyThreshold, HealthyThreshold: DefaultHealthyThreshold,
			UserAgent: DefaultUserAgent,
		}
	}
	return l.defaultHC
}

// healthCheck decodes a health_check block over the defaults.
func (l *loader) healthCheck(b *hcl.Block) *HealthCheck {
	hc := *l.defaultHealthCheck()
	content, diags := b.Body.Content(healthCheckSchema)
	l.diags = append(l.diags, diags...)
	a := content.Attributes
	l.boolean(a, "enabled", &hc.Enabled)
	if attr := a["path"]; attr != nil {
		var p string
		if l.decode(attr, &p) {
			if !strings.HasPrefix(p, "/") {
				l.add(attr.Expr.Range(), "Invalid health check path",
					fmt.Sprintf("path must start with \"/\", such as \"/cdn-health\"; got %q.", p))
			} else {
				hc.Path = p
			}
		}
	}
	if attr := a["timeout"]; attr != nil {
		hc.TimeoutSet, hc.TimeoutRange = true, attr.Expr.Range()
		l.duration(a, "timeout", &hc.Timeout)
	}
	l.integer(a, "unhealthy_threshold", 1, &hc.UnhealthyThreshold)
	l.integer(a, "healthy_threshold", 1, &hc.HealthyThreshold)
	l.nonEmpty(a, "user_agent", &hc.UserAgent)
	if attr := a["expected_status"]; attr != nil {
		var codes []int
		if l.decode(attr, &codes) {
			for _, c := range codes {
				if c < 100 || c > 599 {
					l.add(attr.Expr.Range(), "Invalid expected_status",
						fmt.Sprintf("%d is not an HTTP status code; use codes from 100 to 599, such as [200, 204].", c))
					codes = nil
					break
				}
			}
			hc.ExpectedStatus = codes
		}
	}
	l.str(a, "expected_body", &hc.ExpectedBody)
	l.duration(a, "max_latency", &hc.MaxLatency)
	if attr := a["ca_file"]; attr != nil {
		var path string
		if l.decode(attr, &path) {
			l.caFile(attr, path, &hc)
		}
	}
	if attr := a["tls_server_name"]; attr != nil {
		var n string
		if l.decode(attr, &n) {
			if err := checkHostname(n); err != nil {
				l.add(attr.Expr.Range(), "Invalid tls_server_name", strings.Replace(err.Error(), "hostname", "tls_server_name", 1))
			} else {
				hc.TLSServerName = strings.ToLower(n)
			}
		}
	}
	if attr := a["insecure_skip_tls_verify"]; attr != nil && l.decode(attr, &hc.InsecureSkipTLSVerify) && hc.InsecureSkipTLSVerify {
		l.warnCapped("insecure", attr.Expr.Range(), "Certificate verification is off",
			"insecure_skip_tls_verify = true: probes of this site accept any certificate, so a man in the middle or a wrong origin looks healthy. Prefer ca_file (a private CA) or tls_server_name (a certificate for another name).")
	}
	if attr := a["headers"]; attr != nil {
		var h map[string]string
		if l.decode(attr, &h) {
			l.headers(attr, h, &hc)
		}
	}
	l.boolean(a, "follow_redirects", &hc.FollowRedirects)
	if attr := a["max_body"]; attr != nil {
		l.maxBody(attr, &hc)
	}
	l.antiFlap(a, content.Blocks, &hc)
	if attr := a["confirm_interval"]; attr != nil {
		hc.ConfirmRange = attr.Expr.Range()
		l.duration(a, "confirm_interval", &hc.ConfirmInterval)
	}
	return &hc
}

// MinConfirmInterval is the shortest confirm_interval: a confirmation is a
// round of the whole chain, and its plugins must have time to answer.
const MinConfirmInterval = 500 * time.Millisecond

// DefaultConfirmBudget is control { confirm_budget }'s default: a
// confirmation round probes at most this per cent of sites_per_round.
const DefaultConfirmBudget = 10

// checkConfirm checks every site's confirm_interval against the round:
// at least MinConfirmInterval and less than round_interval (a confirmation
// due no sooner than the next round is that round). Called by finish,
// once the control block is known.
func (l *loader) checkConfirm() {
	interval := l.cfg.Control.RoundInterval
	seen := map[*HealthCheck]bool{}
	for _, s := range l.cfg.Sites {
		hc := s.HealthCheck
		if hc == nil || hc.ConfirmInterval == 0 || seen[hc] {
			continue
		}
		seen[hc] = true
		switch {
		case hc.ConfirmInterval < MinConfirmInterval:
			l.add(hc.ConfirmRange, "confirm_interval too short",
				fmt.Sprintf("confirm_interval is %s: a confirmation asks the whole chain again, so it must be at least %s. Use a few seconds, such as \"3s\".", hc.ConfirmInterval, MinConfirmInterval))
			hc.ConfirmInterval = 0
		case hc.ConfirmInterval >= interval:
			l.add(hc.ConfirmRange, "confirm_interval not shorter than round_interval",
				fmt.Sprintf("confirm_interval is %s and round_interval %s: a confirmation that is not due before the next round is that round. Set confirm_interval below round_interval (such as a tenth of it, %q), or remove it.", hc.ConfirmInterval, interval, (interval/10).String()))
			hc.ConfirmInterval = 0
		}
	}
}

// antiFlap reads quarantine, failback_dwell and the flap block. It leaves
// hc.AntiFlap nil when none of them is set.
func (l *loader) antiFlap(a hcl.Attributes, blocks hcl.Blocks, hc *HealthCheck) {
	var af AntiFlap
	l.duration(a, "quarantine", &af.Quarantine)
	l.duration(a, "failback_dwell", &af.FailbackDwell)
	var flap *hcl.Block
	for _, b := range blocks {
		if b.Type != "flap" {
			continue
		}
		if flap != nil {
			l.add(b.DefRange, "Duplicate flap block",
				fmt.Sprintf("health_check has one flap block; the first is at %s.", flap.DefRange))
			continue
		}
		flap = b
		content, diags := b.Body.Content(flapSchema)
		l.diags = append(l.diags, diags...)
		l.integer(content.Attributes, "changes", 1, &af.FlapChanges)
		l.duration(content.Attributes, "within", &af.FlapWithin)
		if af.FlapChanges == 0 || af.FlapWithin == 0 {
			af.FlapChanges, af.FlapWithin = 0, 0
		}
	}
	for _, b := range blocks {
		if b.Type != "ramp" {
			continue
		}
		if af.Ramp != nil {
			l.add(b.DefRange, "Duplicate ramp block", "health_check has one ramp block.")
			continue
		}
		if r := l.ramp(b); r != nil {
			af.Ramp = r
		}
	}
	if af != (AntiFlap{}) {
		hc.AntiFlap = &af
	}
}

// ramp reads a ramp block; nil when it is not valid (with a diagnostic).
func (l *loader) ramp(b *hcl.Block) *Ramp {
	content, diags := b.Body.Content(rampSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return nil
	}
	r := &Ramp{}
	a := content.Attributes
	attr := a["steps"]
	if !l.decode(attr, &r.Steps) {
		return nil
	}
	ok := len(r.Steps) >= 2 && r.Steps[len(r.Steps)-1] == 100
	for i, st := range r.Steps {
		if st < 1 || st > 100 || (i > 0 && st <= r.Steps[i-1]) {
			ok = false
		}
	}
	if !ok {
		l.add(attr.Expr.Range(), "Invalid ramp steps",
			fmt.Sprintf("steps are the per cents of new requests sent to the recovering level, ascending, from 1 to 100, at least two and the last 100, such as [5, 25, 100]; got %v.", r.Steps))
		return nil
	}
	l.duration(a, "interval", &r.Interval)
	if r.Interval <= 0 {
		return nil
	}
	return r
}

type caFile struct {
	pem  []byte
	name string
	err  string
}

// caFile reads a CA bundle once per path: a relative path is relative to
// the directory of the file that names it.
func (l *loader) caFile(attr *hcl.Attribute, path string, hc *HealthCheck) {
	if strings.TrimSpace(path) == "" {
		l.add(attr.Expr.Range(), "Empty ca_file", "ca_file must name a file of PEM certificates; remove it to trust the system's roots.")
		return
	}
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(filepath.Dir(attr.Expr.Range().Filename), path)
	}
	if l.caFiles == nil {
		l.caFiles = map[string]caFile{}
	}
	ca, ok := l.caFiles[full]
	if !ok {
		ca = readCA(full)
		l.caFiles[full] = ca
	}
	if ca.err != "" {
		l.add(attr.Expr.Range(), "Unusable ca_file", fmt.Sprintf("ca_file %q: %s", path, ca.err))
		return
	}
	hc.CAFile, hc.CA, hc.CAName = path, ca.pem, ca.name
}

func readCA(path string) caFile {
	b, err := os.ReadFile(path)
	if err != nil {
		return caFile{err: fmt.Sprintf("%v. Give the path of a file of PEM certificates (relative paths start at the configuration file's folder).", err)}
	}
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return caFile{err: fmt.Sprintf("certificate %d does not parse: %v.", n+1, err)}
		}
		n++
	}
	if n == 0 {
		return caFile{err: "the file holds no PEM certificate (-----BEGIN CERTIFICATE-----). Give the CA's certificate in PEM form."}
	}
	sum := sha256.Sum256(b)
	return caFile{pem: b, name: "sha256:" + hex.EncodeToString(sum[:])}
}

func (l *loader) headers(attr *hcl.Attribute, h map[string]string, hc *HealthCheck) {
	out := make(map[string]string, len(h))
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names) // diagnostics in a stable order
	for _, name := range names {
		v := h[name]
		canon := textproto.CanonicalMIMEHeaderKey(name)
		switch {
		case !validToken(name):
			l.add(attr.Expr.Range(), "Invalid header name",
				fmt.Sprintf("headers: %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~ only).", name))
			continue
		case slices.Contains(refusedHeaders, canon):
			l.add(attr.Expr.Range(), "Header not allowed",
				fmt.Sprintf("headers: %s is set by the probe itself (Host is the site's hostname, User-Agent is user_agent) or frames the request; remove it.", canon))
			continue
		case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }):
			// The value may be a credential: never echo it.
			l.add(attr.Expr.Range(), "Invalid header value",
				fmt.Sprintf("headers: the value of %s has a control character (a line break?); write it on one line.", canon))
			continue
		}
		out[canon] = v
	}
	if len(out) > 0 {
		hc.Headers = out
	}
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// maxBody reads a byte size: a number of bytes, or a string with a unit
// (B, KB, KiB, MB, MiB, GB, GiB).
func (l *loader) maxBody(attr *hcl.Attribute, hc *HealthCheck) {
	val, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		l.diags = append(l.diags, diags...)
		return
	}
	var n int64
	var ok bool
	switch {
	case val.Type().FriendlyName() == "number":
		f, _ := val.AsBigFloat().Float64()
		n, ok = int64(f), f == float64(int64(f))
	case val.Type().FriendlyName() == "string":
		n, ok = parseSize(val.AsString())
	}
	if !ok || n < 1 || n > MaxBodyLimit {
		l.add(attr.Expr.Range(), "Invalid max_body",
			"max_body is the most bytes of a body a probe reads: a whole number of bytes or a size such as \"256KiB\" or \"1MiB\", from 1 byte to 1GiB.")
		return
	}
	hc.MaxBody = n
}

func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > MaxBodyLimit/mult+1 {
		return 0, false
	}
	return n * mult, true
}

// shareHealthChecks makes sites with the same health check settings share
// one value: a fleet of many sites usually repeats the same block.
func (l *loader) shareHealthChecks() {
	seen := map[string]*HealthCheck{}
	var b strings.Builder
	for i := range l.siteBlocks {
		sb := &l.siteBlocks[i]
		s := sb.site
		hc := s.HealthCheck
		if hc == l.defaultHC || hc.TimeoutSet {
			continue // shared already; or its timeout's range points at its own block
		}
		b.Reset()
		hcKey(&b, hc)
		if prev, ok := seen[b.String()]; ok {
			if prev == hc {
				continue
			}
			if sb.reused {
				// A site taken again from the last load may be in force:
				// it changes in a copy.
				c := *s
				s = &c
				sb.site, l.cfg.Sites[i] = s, s
			}
			s.HealthCheck = prev
			continue
		}
		seen[b.String()] = hc
	}
}

func hcKey(b *strings.Builder, hc *HealthCheck) {
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	num := func(n int64) {
		b.WriteString(strconv.FormatInt(n, 10))
		b.WriteByte(',')
	}
	bit := func(v bool) {
		if v {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	bit(hc.Enabled)
	bit(hc.InsecureSkipTLSVerify)
	bit(hc.FollowRedirects)
	field(hc.Path)
	num(int64(hc.Timeout))
	num(int64(hc.UnhealthyThreshold))
	num(int64(hc.HealthyThreshold))
	field(hc.UserAgent)
	for _, c := range hc.ExpectedStatus {
		num(int64(c))
	}
	b.WriteByte('|')
	field(hc.ExpectedBody)
	num(int64(hc.MaxLatency))
	field(hc.CAName)
	field(hc.TLSServerName)
	num(hc.MaxBody)
	if hc.ConfirmInterval > 0 {
		b.WriteString("confirm:")
		num(int64(hc.ConfirmInterval))
	}
	if af := hc.AntiFlap; af != nil {
		b.WriteString("af:")
		num(int64(af.Quarantine))
		num(int64(af.FailbackDwell))
		num(int64(af.FlapChanges))
		num(int64(af.FlapWithin))
		if r := af.Ramp; r != nil {
			b.WriteString("ramp:")
			for _, st := range r.Steps {
				num(int64(st))
			}
			num(int64(r.Interval))
		}
	}
	names := make([]string, 0, len(hc.Headers))
	for n := range hc.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		field(n)
		field(hc.Headers[n])
	}
}
