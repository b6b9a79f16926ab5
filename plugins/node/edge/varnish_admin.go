package edge

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// VarnishAdminOptions configure the live Varnish driver.
type VarnishAdminOptions struct {
	// Addr is varnishd's management address (its -T host:port).
	Addr string
	// Secret is the content of varnishd's -S secret file, as is.
	Secret []byte
	// ProbeURL is the URL each backend's probe fetches (default "/");
	// "off" for no probes (then a backend of a level in use is healthy
	// until vigil says otherwise).
	ProbeURL string
	// Timeout bounds each connection and command (default 10s; a VCL
	// compile takes seconds).
	Timeout time.Duration
}

// VarnishAdmin drives a running varnishd through its management port
// (the protocol varnishadm speaks): it loads a VCL holding every known
// origin of every level, and switches levels with backend.set_health
// alone, without compiling a VCL. A VCL is compiled and loaded only when
// that VCL changes: an origin comes or goes, a site comes or goes, or a
// failback ramp starts, changes its weight or ends.
//
// The VCL has a backend per origin (probed), a round-robin director per
// site and level, and per site a fallback director over its levels in
// order: the first level with a healthy backend serves. The levels before
// the current one are set sick, the current one and the later ones auto
// (their probes decide), so Varnish falls over to the next level on its
// own when the current level's probes fail, until vigil switches. During
// a ramp, the current level and the level being left form one weighted
// random director.
type VarnishAdmin struct {
	opts   VarnishAdminOptions
	loaded string // the VCL in use, as loaded by this driver
	name   string // its name in varnishd
	seq    int
}

// NewVarnishAdmin returns the live Varnish driver.
func NewVarnishAdmin(opts VarnishAdminOptions) (*VarnishAdmin, error) {
	if opts.Addr == "" {
		return nil, fmt.Errorf("varnish: no management address: give varnishd's -T host:port")
	}
	if len(opts.Secret) == 0 {
		return nil, fmt.Errorf("varnish: empty secret: give the file varnishd's -S names (Debian: /etc/varnish/secret)")
	}
	if opts.ProbeURL == "" {
		opts.ProbeURL = "/"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	return &VarnishAdmin{opts: opts}, nil
}

// Name is "varnish".
func (d *VarnishAdmin) Name() string { return "varnish" }

// Apply loads the View's VCL when it differs from the one in use, then
// sets every backend's health for the current levels.
func (d *VarnishAdmin) Apply(ctx context.Context, v *View) (Result, error) {
	vcl, health, err := varnishVCL(v, d.opts.ProbeURL)
	if err != nil {
		return Result{}, err
	}
	c, err := dialVarnish(ctx, d.opts.Addr, d.opts.Secret, d.opts.Timeout)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	var res Result
	name := d.name
	if vcl != d.loaded || d.name == "" || !c.inUse(d.name) {
		d.seq++
		name = fmt.Sprintf("vigil_%d_%d", time.Now().Unix(), d.seq)
		if _, err := c.cmd("vcl.inline " + name + " << VIGIL_END\n" + vcl + "\nVIGIL_END"); err != nil {
			return res, fmt.Errorf("varnish: loading the VCL: %w", err)
		}
		// Health first, so that the new VCL serves the right level from
		// its first request.
		if err := c.setHealth(name+".", health); err != nil {
			return res, err
		}
		if _, err := c.cmd("vcl.use " + name); err != nil {
			return res, fmt.Errorf("varnish: using the new VCL: %w", err)
		}
		// The VCLs this driver loaded before (an earlier vigil-node
		// process's too) are discarded once their requests end; a failure
		// leaves a cold VCL.
		for _, old := range c.ours(name) {
			_, _ = c.cmd("vcl.discard " + old)
		}
		d.loaded, d.name = vcl, name
		res.Reloaded = true
		res.Changes++
	}
	if err := c.setHealth(name+".", health); err != nil {
		return res, err
	}
	res.Changes += len(health)
	return res, nil
}

// varnishBackend is one backend of the VCL.
type varnishBackend struct {
	Name   string
	Origin Origin
	Weight int
}

// varnishLevel is one level of a site in the VCL.
type varnishLevel struct {
	Level    int
	Backends []varnishBackend
}

type varnishSite struct {
	Index    int
	Name     string
	Hostname string
	Levels   []varnishLevel
	// Ramp is set during a failback ramp: the ramp director holds the
	// current level and the level being left, with weights.
	Ramp      bool
	RampFrom  int
	RampLevel int
	// Entries are the site's fallback director's members in order: a
	// director and how many backends it has.
	Entries []varnishEntry
}

// varnishEntry is one member of a site's fallback director.
type varnishEntry struct {
	Director string
	Count    int
}

// varnishVCL renders the VCL of v (independent of the current levels
// outside ramps) and the admin health of each backend.
func varnishVCL(v *View, probe string) (string, map[string]string, error) {
	health := map[string]string{}
	var sites []varnishSite
	for i, s := range v.Sites {
		vs := varnishSite{Index: i, Name: s.Name, Hostname: strings.ToLower(s.Hostname)}
		byLevel := map[int][]Origin{}
		seen := map[string]bool{}
		add := func(os []Origin) {
			for _, o := range os {
				if o.TLS || seen[o.Name] {
					continue
				}
				seen[o.Name] = true
				byLevel[o.Level] = append(byLevel[o.Level], o)
			}
		}
		add(s.Origins)
		if s.Ramp != nil {
			add(s.Ramp.Origins)
			vs.Ramp, vs.RampFrom, vs.RampLevel = true, s.Ramp.From, s.Level
		}
		add(s.Others)
		levels := make([]int, 0, len(byLevel))
		for l := range byLevel {
			levels = append(levels, l)
		}
		slices.Sort(levels)
		for _, l := range levels {
			vl := varnishLevel{Level: l}
			for j, o := range byLevel[l] {
				b := varnishBackend{Name: fmt.Sprintf("vigil_%d_l%d_%d", i, l, j), Origin: o}
				if vs.Ramp {
					b.Weight = o.Weight
				}
				vl.Backends = append(vl.Backends, b)
				h := "auto"
				if l < s.Level && !(vs.Ramp && l == vs.RampFrom) {
					h = "sick"
				}
				health[b.Name] = h
			}
			vs.Levels = append(vs.Levels, vl)
			switch {
			case vs.Ramp && l == vs.RampLevel:
				n := len(vl.Backends) + len(byLevel[vs.RampFrom])
				vs.Entries = append(vs.Entries, varnishEntry{Director: fmt.Sprintf("vigil_%d_ramp", i), Count: n})
			case vs.Ramp && l == vs.RampFrom:
			default:
				vs.Entries = append(vs.Entries, varnishEntry{Director: fmt.Sprintf("vigil_%d_l%d", i, l), Count: len(vl.Backends)})
			}
		}
		sites = append(sites, vs)
	}
	var b strings.Builder
	if err := varnishTemplate.Execute(&b, map[string]any{"Sites": sites, "Probe": probe}); err != nil {
		return "", nil, fmt.Errorf("varnish: rendering the VCL: %w", err)
	}
	return b.String(), health, nil
}

var varnishTemplate = template.Must(template.New("vcl").Funcs(Funcs).Funcs(template.FuncMap{"inc": func(i int) int { return i + 1 }}).Parse(`vcl 4.1;
# Loaded by vigil-node through varnishd's management port; levels are
# switched with backend.set_health. Do not edit: it is replaced when the
# origins change.
import directors;
import std;
backend vigil_none none;
{{- range $s := .Sites}}
# site {{$s.Name}} ({{$s.Hostname}})
{{- range $l := $s.Levels}}{{range $b := $l.Backends}}
backend {{$b.Name}} { # {{$b.Origin.Name}}, level {{$l.Level}}
    .host = "{{$b.Origin.Host}}";
    .port = "{{$b.Origin.Port}}";
    .host_header = "{{$s.Hostname}}";
    .connect_timeout = 2s;
{{- if ne $.Probe "off"}}
    .probe = {
        .url = "{{$.Probe}}";
        .interval = 1s;
        .timeout = 2s;
        .window = 3;
        .threshold = 2;
        .initial = 2;
    }
{{- end}}
}
{{- end}}{{end}}
{{- end}}

sub vcl_init {
{{- range $s := .Sites}}
{{- range $l := $s.Levels}}
{{- if and $s.Ramp (or (eq $l.Level $s.RampLevel) (eq $l.Level $s.RampFrom))}}
{{- if eq $l.Level $s.RampLevel}}
    new vigil_{{$s.Index}}_ramp = directors.random();
{{- range $s.Levels}}{{if or (eq .Level $s.RampLevel) (eq .Level $s.RampFrom)}}{{range .Backends}}
    vigil_{{$s.Index}}_ramp.add_backend({{.Name}}, {{or .Weight 1}});
{{- end}}{{end}}{{end}}
{{- end}}
{{- else}}
    new vigil_{{$s.Index}}_l{{$l.Level}} = directors.round_robin();
{{- range $l.Backends}}
    vigil_{{$s.Index}}_l{{$l.Level}}.add_backend({{.Name}});
{{- end}}
{{- end}}
{{- end}}
    new vigil_{{$s.Index}} = directors.fallback();
{{- range $s.Entries}}
    vigil_{{$s.Index}}.add_backend({{.Director}}.backend());
{{- end}}
{{- end}}
}

sub vcl_recv {
    set req.backend_hint = vigil_none;
{{- range $s := .Sites}}{{if $s.Levels}}
    if (std.tolower(regsub(req.http.host, ":[0-9]+$", "")) == "{{$s.Hostname}}") {
        set req.backend_hint = vigil_{{$s.Index}}.backend();
    }
{{- end}}{{end}}
    if (req.backend_hint == vigil_none) {
        return (synth(421, "Misdirected Request"));
    }
}

sub vcl_backend_fetch {
{{- range $s := .Sites}}{{if gt (len $s.Entries) 1}}
    if (std.tolower(regsub(bereq.http.host, ":[0-9]+$", "")) == "{{$s.Hostname}}") {
        # Retried on as many origins as the serving level (the first
        # healthy one) has: the next healthy level after it.
{{- range $i, $e := $s.Entries}}
        {{if $i}}} else {{end}}if (std.healthy({{$e.Director}}.backend())) {
            if (bereq.retries >= {{$e.Count}}) {
{{- range $j, $n := $s.Entries}}{{if gt $j $i}}
                {{if gt $j (inc $i)}}} else {{end}}if (std.healthy({{$n.Director}}.backend())) {
                    set bereq.backend = {{$n.Director}}.backend();
{{- end}}{{end}}
{{- if lt (inc $i) (len $s.Entries)}}
                }
{{- end}}
            }
{{- end}}
        }
    }
{{- end}}{{end}}
}

sub vcl_backend_response {
    if (beresp.status >= 500 && bereq.retries < 3 && (bereq.method == "GET" || bereq.method == "HEAD")) {
        return (retry);
    }
}

sub vcl_backend_error {
    if (bereq.retries < 3 && (bereq.method == "GET" || bereq.method == "HEAD")) {
        return (retry);
    }
}
`))

// varnishConn is an authenticated management connection.
type varnishConn struct {
	conn    net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

// dialVarnish connects to addr and answers the secret's challenge.
func dialVarnish(ctx context.Context, addr string, secret []byte, timeout time.Duration) (*varnishConn, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("varnish: connecting to the management port %s: %w", addr, err)
	}
	c := &varnishConn{conn: conn, r: bufio.NewReader(conn), timeout: timeout}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	status, body, err := c.read()
	if err != nil {
		c.close()
		return nil, fmt.Errorf("varnish: %s: %w", addr, err)
	}
	if status == 107 {
		challenge, _, _ := strings.Cut(body, "\n")
		h := sha256.New()
		h.Write([]byte(challenge + "\n"))
		h.Write(secret)
		h.Write([]byte(challenge + "\n"))
		if _, err := c.cmd("auth " + hex.EncodeToString(h.Sum(nil))); err != nil {
			c.close()
			return nil, fmt.Errorf("varnish: %s refused the secret (is it the file varnishd's -S names?): %w", addr, err)
		}
	} else if status != 200 {
		c.close()
		return nil, fmt.Errorf("varnish: %s answered %d: %s", addr, status, body)
	}
	return c, nil
}

func (c *varnishConn) close() { _ = c.conn.Close() }

// read reads one answer: "STATUS LENGTH\n", LENGTH bytes, "\n".
func (c *varnishConn) read() (int, string, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return 0, "", fmt.Errorf("reading an answer: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		return 0, "", fmt.Errorf("not a management answer: %q", line)
	}
	status, err1 := strconv.Atoi(f[0])
	n, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || n < 0 {
		return 0, "", fmt.Errorf("not a management answer: %q", line)
	}
	body := make([]byte, n+1)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, "", fmt.Errorf("reading an answer: %w", err)
	}
	return status, string(body[:n]), nil
}

// cmd sends one command and returns its answer; a status other than 200
// is an error.
func (c *varnishConn) cmd(line string) (string, error) {
	_ = c.conn.SetDeadline(time.Now().Add(c.timeout))
	if _, err := io.WriteString(c.conn, line+"\n"); err != nil {
		return "", fmt.Errorf("sending a command: %w", err)
	}
	status, body, err := c.read()
	if err != nil {
		return "", err
	}
	if status != 200 {
		verb, _, _ := strings.Cut(line, " ")
		return body, fmt.Errorf("%s: status %d: %s", verb, status, strings.TrimSpace(body))
	}
	return body, nil
}

// inUse reports whether name is the active VCL (varnishd restarted, or
// another tool loaded a VCL, when it is not).
func (c *varnishConn) inUse(name string) bool {
	out, err := c.cmd("vcl.list")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "active" && f[len(f)-1] == name {
			return true
		}
	}
	return false
}

// ours lists the VCLs loaded by a VarnishAdmin (named vigil_N_N), but
// keep.
func (c *varnishConn) ours(keep string) []string {
	out, err := c.cmd("vcl.list")
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] == "active" {
			continue
		}
		name := f[len(f)-1]
		if n := strings.Split(name, "_"); name != keep && len(n) == 3 && n[0] == "vigil" && isDigits(n[1]) && isDigits(n[2]) {
			names = append(names, name)
		}
	}
	return names
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// setHealth sets each backend of the VCL prefix ("NAME.") to its health.
func (c *varnishConn) setHealth(prefix string, health map[string]string) error {
	names := make([]string, 0, len(health))
	for n := range health {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, err := c.cmd("backend.set_health " + prefix + n + " " + health[n]); err != nil {
			return fmt.Errorf("varnish: %w", err)
		}
	}
	return nil
}
