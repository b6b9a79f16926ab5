package edge

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// HAProxy server admin state bits (srv_admin_state of show servers state).
const (
	adminFMaint = 0x01 // forced maintenance (set server state maint)
	adminFDrain = 0x08 // forced drain (set server state drain)
)

// DefaultHAProxyTimeout bounds one Runtime API command.
const DefaultHAProxyTimeout = 5 * time.Second

// DefaultHAProxyServerArgs are the arguments of every server vigil-node
// adds unless told otherwise (-haproxy-server-args): a health check every
// second, and HAProxy's watch of real traffic (observe layer7: a connection
// failure, a timeout or a 500, 502, 503 or 504) marking a server down at
// its first error. With these, HAProxy stops sending requests to a failing
// origin at once and, when every server of the current level is down,
// serves from the backup servers (the next level) until vigil switches.
// HAProxy does not apply haproxy.cfg's default-server to the servers added
// at run time, so the arguments must be given here.
const DefaultHAProxyServerArgs = "check inter 1s fall 2 rise 2 observe layer7 error-limit 1 on-error mark-down"

// BackupSuffix is appended to an origin's server name to name its backup
// server: the same origin added with HAProxy's backup flag, ready while
// the origin's level is the site's next one (View's Site.Backup). HAProxy
// cannot change a server's backup flag at run time, so each origin has two
// servers, and a switch only changes their states.
const BackupSuffix = ":backup"

// DefaultHAProxyWatch is how often the HAProxy driver asks show info which
// process answers, to apply the publication again at once after a reload
// or a restart (HAProxyOptions.Watch).
const DefaultHAProxyWatch = 100 * time.Millisecond

// DefaultHAProxyTLSArgs are the server arguments of an added https origin;
// {sni} is replaced by the site's hostname.
const DefaultHAProxyTLSArgs = "ssl verify required ca-file @system-ca sni str({sni})"

// HAProxyOptions configure the HAProxy runtime driver.
type HAProxyOptions struct {
	// Socket is the Runtime API: a unix socket path ("/run/haproxy/admin.sock"
	// or "unix:/path") or a TCP address ("tcp:127.0.0.1:9999" or
	// "127.0.0.1:9999"). It must be at level admin.
	Socket string
	// ServerArgs are appended to every added server ("check inter 2s"...).
	// With "check", the added server's health check is enabled too.
	// Empty: none, and HAProxy then never finds a server down, so the
	// next level's backup servers never serve; vigil-node's
	// -haproxy-server-args defaults to DefaultHAProxyServerArgs.
	ServerArgs string
	// TLSArgs are appended for https origins (default DefaultHAProxyTLSArgs).
	TLSArgs string
	// Fallback, when set, is a template of the whole HAProxy configuration:
	// it is written (and checked) at every publication, and reloaded when
	// the runtime cannot apply it (a backend that is not declared, a server
	// HAProxy cannot add).
	Fallback *Template
	// Timeout bounds each command (default 5s).
	Timeout time.Duration
	// Resolve turns a hostname origin into an address (default: the system
	// resolver, IPv4 first).
	Resolve func(ctx context.Context, host string) (netip.Addr, error)
	// RemoveAfter is how long a server vigil-node added must have been out
	// of every level of its site (or its site out of the publication)
	// before it is deleted with del server (default
	// DefaultHAProxyRemoveAfter; negative: at the first apply). It is in
	// maintenance meanwhile. See haproxy_del.go.
	RemoveAfter time.Duration
	// DrainTimeout, when positive, is how long such a server's sessions
	// may run once it is in maintenance: past it, they are cut (shutdown
	// sessions server) so that the server can be deleted. Zero: sessions
	// are never cut, the deletion waits for them.
	DrainTimeout time.Duration
	// Log receives the removals and the deletions HAProxy refused
	// (default: nothing).
	Log hclog.Logger
	// Watch is how often Watch asks HAProxy (show info) whether its
	// process changed (default DefaultHAProxyWatch; negative: never).
	Watch time.Duration
}

// HAProxy applies Views through HAProxy's Runtime API, with no reload.
type HAProxy struct {
	opts HAProxyOptions
	net  string
	addr string

	mu      sync.Mutex
	version string // HAProxy's version, once asked
	canAdd  bool
	// proc identifies the HAProxy process that answered last (its pid and
	// start time, from show info): a new one lost the servers added.
	proc     string
	restarts int

	now func() time.Time
	rm  removals
}

// NewHAProxy returns the driver; nothing is dialled until Apply.
func NewHAProxy(opts HAProxyOptions) (*HAProxy, error) {
	h := &HAProxy{opts: opts}
	switch s := opts.Socket; {
	case s == "":
		return nil, errors.New("haproxy: no Runtime API socket: give the path of haproxy.cfg's `stats socket` (at level admin)")
	case strings.HasPrefix(s, "unix:"):
		h.net, h.addr = "unix", strings.TrimPrefix(s, "unix:")
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, "."):
		h.net, h.addr = "unix", s
	default:
		h.net, h.addr = "tcp", strings.TrimPrefix(s, "tcp:")
		if _, _, err := net.SplitHostPort(h.addr); err != nil {
			return nil, fmt.Errorf("haproxy: socket %q is neither a unix socket path nor host:port: %w", s, err)
		}
	}
	if h.opts.TLSArgs == "" {
		h.opts.TLSArgs = DefaultHAProxyTLSArgs
	}
	if h.opts.Timeout <= 0 {
		h.opts.Timeout = DefaultHAProxyTimeout
	}
	if h.opts.Resolve == nil {
		h.opts.Resolve = resolve
	}
	switch {
	case h.opts.RemoveAfter == 0:
		h.opts.RemoveAfter = DefaultHAProxyRemoveAfter
	case h.opts.RemoveAfter < 0:
		h.opts.RemoveAfter = 0 // at the first apply (and logged as 0s)
	}
	if h.opts.Log == nil {
		h.opts.Log = hclog.NewNullLogger()
	}
	if h.opts.Watch == 0 {
		h.opts.Watch = DefaultHAProxyWatch
	}
	h.now = time.Now
	h.rm = newRemovals()
	return h, nil
}

// Name implements Driver.
func (h *HAProxy) Name() string { return "haproxy" }

// ErrRuntimeUnreachable wraps the errors of a socket that is missing or
// refuses connections.
var ErrRuntimeUnreachable = errors.New("haproxy runtime API unreachable")

// Command sends one Runtime API command and returns HAProxy's answer.
func (h *HAProxy) Command(ctx context.Context, line string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, h.net, h.addr)
	if err != nil {
		return "", fmt.Errorf("%w: %s %s: %v (check the `stats socket` line of haproxy.cfg, that HAProxy runs, and that vigil-node may open the socket)", ErrRuntimeUnreachable, h.net, h.addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", fmt.Errorf("%w: sending %q: %v", ErrRuntimeUnreachable, verb(line), err)
	}
	b, err := io.ReadAll(bufio.NewReader(io.LimitReader(c, 64<<20)))
	if err != nil {
		return "", fmt.Errorf("%w: reading the answer to %q: %v", ErrRuntimeUnreachable, verb(line), err)
	}
	out := strings.TrimSpace(string(b))
	if strings.HasPrefix(out, "Permission denied") {
		return out, fmt.Errorf("haproxy refused %q: %s (the stats socket must be at `level admin`)", verb(line), out)
	}
	return out, nil
}

func verb(line string) string {
	f := strings.Fields(line)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

// server is one line of show servers state.
type server struct {
	name, addr, port string
	admin            int
	// uweight and iweight are the server's current and initial weights,
	// -1 when unknown.
	uweight, iweight int
	// id is the server's srv_id (0 when unknown); added is true for a
	// server vigil-node added (a forced id of dynamicIDBase or more).
	id    int
	added bool
}

// serversState reads every backend's servers.
func (h *HAProxy) serversState(ctx context.Context) (map[string]map[string]server, error) {
	out, err := h.Command(ctx, "show servers state")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "# ") {
		return nil, fmt.Errorf("haproxy: unexpected answer to show servers state: %.200q", out)
	}
	col := map[string]int{}
	for i, name := range strings.Fields(strings.TrimPrefix(lines[1], "# ")) {
		col[name] = i
	}
	for _, c := range []string{"be_name", "srv_name", "srv_addr", "srv_admin_state", "srv_port"} {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("haproxy: show servers state has no %s column", c)
		}
	}
	state := map[string]map[string]server{}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) <= col["srv_port"] || strings.HasPrefix(l, "#") {
			continue
		}
		admin, _ := strconv.Atoi(f[col["srv_admin_state"]])
		be := f[col["be_name"]]
		if state[be] == nil {
			state[be] = map[string]server{}
		}
		num := func(c string) int { // the column c as a number, -1 when it is not
			if i, ok := col[c]; ok && i < len(f) {
				if w, err := strconv.Atoi(f[i]); err == nil {
					return w
				}
			}
			return -1
		}
		id, forced := num("srv_id"), num("srv_f_forced_id")
		state[be][f[col["srv_name"]]] = server{name: f[col["srv_name"]], addr: f[col["srv_addr"]], port: f[col["srv_port"]], admin: admin,
			uweight: num("srv_uweight"), iweight: num("srv_iweight"),
			id: max(id, 0), added: forced == 1 && id >= dynamicIDBase}
	}
	// Backends without any server are not listed: ask for them by name.
	return state, nil
}

// process asks HAProxy (show info) its version, which add server needs
// (2.4), and which process answers. It returns true when that process is
// not the one that answered before: HAProxy was reloaded or restarted, and
// the servers vigil-node added are gone.
func (h *HAProxy) process(ctx context.Context) (bool, error) {
	out, err := h.Command(ctx, "show info")
	if err != nil {
		return false, err
	}
	var v, pid, start string
	for _, l := range strings.Split(out, "\n") {
		k, val, ok := strings.Cut(l, ": ")
		if !ok {
			continue
		}
		switch val = strings.TrimSpace(val); k {
		case "Version":
			v = val
		case "Pid":
			pid = val
		case "Start_time_sec":
			start = val
		}
	}
	if v == "" {
		return false, fmt.Errorf("haproxy: show info gave no version: %.200q", out)
	}
	proc := pid + "@" + start // before 2.5, no Start_time_sec: the pid alone
	major, minor := 0, 0
	fmt.Sscanf(v, "%d.%d", &major, &minor)
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := h.proc != "" && h.proc != proc
	if changed {
		h.restarts++
	}
	h.proc, h.version, h.canAdd = proc, v, major > 2 || major == 2 && minor >= 4
	return changed, nil
}

// Restarts counts the new HAProxy processes (reloads, restarts) the driver
// has seen since it started.
func (h *HAProxy) Restarts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.restarts
}

// Watch implements Watcher: every HAProxyOptions.Watch it asks HAProxy
// which process answers (show info: its pid and start time), and calls
// changed when a new one does. A reload (systemctl reload haproxy, SIGUSR2
// to the master) or a restart starts a process with haproxy.cfg's servers
// only: the servers vigil-node added, and the states it set, are gone
// until the publication is applied again, which the Hub then does at once
// instead of at the next resync. An unreachable socket is tried again at
// the next tick, quietly: Apply reports it.
func (h *HAProxy) Watch(ctx context.Context, changed func()) {
	if h.opts.Watch < 0 {
		return
	}
	t := time.NewTicker(h.opts.Watch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c, err := h.process(ctx); err == nil && c {
			h.opts.Log.Info("a new HAProxy process answers the runtime API (reload or restart): applying the publication again")
			changed()
		}
	}
}

// Version returns HAProxy's version once an Apply reached it.
func (h *HAProxy) Version() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version
}

// needsConfig is what the runtime cannot do: the fallback's job.
type needsConfig struct{ what []string }

func (e *needsConfig) Error() string {
	return "the runtime API cannot " + strings.Join(e.what, "; ") + ": declare them in haproxy.cfg, or give vigil-node a fallback template (-haproxy-fallback) to render and reload"
}

// Apply implements Driver: for every site, the backend's servers become the
// current level's origins (ready, or drain when unhealthy while another is
// not), every other server goes to maintenance, and the other known levels'
// origins are added in maintenance so that a switch is a state change.
//
// During a failback ramp (Site.Ramp), the level being left's origins are
// served too (ready, not maintenance), and the two levels' servers get the
// ramp's weights: `set server B/S weight N` with Weight for the current
// level's, FromWeight for the level being left's (before their states
// change). Without a ramp, a served server whose weight differs from its
// initial one (haproxy.cfg's, or the add server's) gets that back.
//
// A server vigil-node added (add server ... id N, N from 1e9) whose origin
// left every level of its site, or whose site left the publication, is
// deleted (del server) once it has been in maintenance for RemoveAfter and
// HAProxy finds it drained; a refused deletion leaves it in maintenance
// and is tried again at the next Apply, without an error. A site that left
// the publication has its other servers (haproxy.cfg's) put in
// maintenance; its backend stays. See haproxy_del.go and Removals.
func (h *HAProxy) Apply(ctx context.Context, v *View) (Result, error) {
	var res Result
	if f := h.opts.Fallback; f != nil {
		r, err := f.Write(ctx, v)
		if err != nil {
			return res, fmt.Errorf("haproxy fallback configuration: %w", err)
		}
		res.Changes += r.Changes
	}
	if _, err := h.process(ctx); err != nil {
		return res, err
	}
	state, err := h.serversState(ctx)
	if err != nil {
		return res, err
	}
	need := &needsConfig{}
	var errs []error
	var backends map[string]bool // show backend, asked once when needed
	exists := func(be string) (bool, error) {
		if backends == nil {
			out, err := h.Command(ctx, "show backend")
			if err != nil {
				return false, err
			}
			backends = map[string]bool{}
			for _, l := range strings.Split(out, "\n") {
				backends[strings.TrimSpace(l)] = true
			}
		}
		return backends[be], nil
	}
	pass := h.rm.begin(v, h.now())
	unreachable := false
	for i := range v.Sites {
		n, err := h.site(ctx, &v.Sites[i], state, exists, need, pass)
		res.Changes += n
		if err != nil {
			errs = append(errs, fmt.Errorf("site %q (backend %s): %w", v.Sites[i].Name, v.Sites[i].Backend, err))
		}
		if errors.Is(err, ErrRuntimeUnreachable) {
			unreachable = true
			break
		}
	}
	if !unreachable {
		n, err := h.removedSites(ctx, state, pass)
		res.Changes += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	h.rm.end(pass)
	if len(need.what) > 0 {
		if h.opts.Fallback == nil {
			errs = append(errs, need)
		} else {
			r, err := h.opts.Fallback.Apply(ctx, v)
			res.Changes += r.Changes
			res.Reloaded = r.Reloaded
			if err != nil {
				return res, fmt.Errorf("%v; the fallback: %w", need, err)
			}
		}
	}
	return res, errors.Join(errs...)
}

type wanted struct {
	o      Origin
	addr   string
	state  string // ready, drain, maint
	active bool
	// weight is the ramp's weight for the server, 0 for its initial one.
	weight int
	// backup is the origin's backup server (named o.Server+BackupSuffix,
	// added with HAProxy's backup flag).
	backup bool
}

// name is the server's name in its backend.
func (w wanted) name() string {
	if w.backup {
		return w.o.Server + BackupSuffix
	}
	return w.o.Server
}

func (h *HAProxy) site(ctx context.Context, s *Site, state map[string]map[string]server, backendExists func(string) (bool, error), need *needsConfig, pass *removalPass) (int, error) {
	servers, ok := state[s.Backend]
	if !ok {
		exists, err := backendExists(s.Backend)
		if err != nil {
			return 0, err
		}
		if !exists {
			need.what = append(need.what, "create backend "+s.Backend)
			return 0, nil
		}
		servers = map[string]server{}
	}
	served := s.Origins
	if s.Ramp != nil {
		served = append(slices.Clip(served), s.Ramp.Origins...)
	}
	someHealthy := false
	for _, o := range served {
		someHealthy = someHealthy || !o.Unhealthy
	}
	var want []wanted
	var errs []error
	for _, o := range served {
		addr, err := h.opts.Resolve(ctx, o.Host)
		if err != nil {
			errs = append(errs, fmt.Errorf("origin %s: %w", o.Name, err))
			continue
		}
		st := "ready"
		if o.Unhealthy && someHealthy {
			st = "drain"
		}
		want = append(want, wanted{o: o, addr: addr.String(), state: st, active: true, weight: o.Weight})
	}
	changes := 0
	activeOK := len(errs) == 0
	taken := map[string]bool{}
	for _, w := range want {
		taken[w.o.Server] = true
		n, err := h.ensure(ctx, s, servers, w, need)
		changes += n
		if err != nil {
			activeOK = false
			errs = append(errs, err)
		}
	}
	if !activeOK {
		// Keep the servers in service as they are: taking the old level out
		// before the new one serves would leave the site without a server.
		return changes, errors.Join(append(errs, errors.New("the other servers are left as they were"))...)
	}
	h.mu.Lock()
	canAdd := h.canAdd
	h.mu.Unlock()
	// The next level's origins: their backup servers ready, which HAProxy
	// uses only when every server of the current level is down by its own
	// checks (or in maintenance), until vigil switches. A backup server
	// HAProxy cannot add (a backend whose algorithm refuses dynamic
	// servers) leaves the site without that cover, not without service.
	for _, o := range s.Backup {
		if taken[o.Server] {
			continue
		}
		w := wanted{o: o, state: "ready", backup: true}
		if _, ok := servers[w.name()]; !ok && !canAdd {
			continue
		}
		taken[w.name()] = true
		addr, err := h.opts.Resolve(ctx, o.Host)
		if err != nil {
			continue // resolved again at the next apply
		}
		w.addr = addr.String()
		n, err := h.ensure(ctx, s, servers, w, &needsConfig{})
		changes += n
		if errors.Is(err, ErrRuntimeUnreachable) {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedKeys(servers) {
		srv := servers[name]
		if taken[name] || srv.admin&adminFMaint != 0 {
			continue
		}
		if err := h.expect(ctx, "set server "+s.Backend+"/"+name+" state maint", ""); err != nil {
			errs = append(errs, err)
			continue
		}
		srv.admin |= adminFMaint
		servers[name] = srv
		changes++
	}
	// Other levels' origins, and the backup servers of every origin:
	// created in maintenance where HAProxy can, so that the stats page
	// shows them and a switch only changes states.
	var missing []wanted
	for _, o := range s.Others {
		if !taken[o.Server] {
			taken[o.Server] = true
			missing = append(missing, wanted{o: o, state: "maint"})
		}
	}
	for _, o := range served {
		missing = append(missing, wanted{o: o, state: "maint", backup: true})
	}
	for _, o := range s.Others {
		missing = append(missing, wanted{o: o, state: "maint", backup: true})
	}
	for _, w := range missing {
		if w.backup {
			if taken[w.name()] {
				continue
			}
			taken[w.name()] = true
		}
		if _, ok := servers[w.name()]; ok || !canAdd {
			continue
		}
		addr, err := h.opts.Resolve(ctx, w.o.Host)
		if err != nil {
			continue // resolved again when it is published
		}
		w.addr = addr.String()
		n, err := h.ensure(ctx, s, servers, w, &needsConfig{})
		changes += n
		if errors.Is(err, ErrRuntimeUnreachable) {
			errs = append(errs, err)
		}
	}
	// The servers vigil-node added whose origin left every level: deleted
	// once out of service long enough and drained.
	if len(errs) == 0 {
		n, err := h.removeLeft(ctx, s.Backend, servers, taken, pass)
		changes += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return changes, errors.Join(errs...)
}

// ensure makes one server exist with w's address and state.
func (h *HAProxy) ensure(ctx context.Context, s *Site, servers map[string]server, w wanted, need *needsConfig) (int, error) {
	id := s.Backend + "/" + w.name()
	changes := 0
	srv, exists := servers[w.name()]
	if !exists {
		h.mu.Lock()
		canAdd := h.canAdd
		h.mu.Unlock()
		if !canAdd {
			need.what = append(need.what, "add server "+id+" (HAProxy "+h.Version()+" has no add server; 2.4 has)")
			return 0, errors.New("server " + id + " is not declared")
		}
		args := h.opts.ServerArgs
		if w.backup {
			args = "backup " + args
		}
		if w.o.TLS {
			args += " " + strings.ReplaceAll(h.opts.TLSArgs, "{sni}", s.Hostname)
		}
		// The id marks the server as vigil-node's: only such servers are
		// ever deleted (haproxy_del.go).
		sid := nextID(servers)
		line := strings.TrimSpace("add server " + id + " " + net.JoinHostPort(w.addr, w.o.Port) + " id " + strconv.Itoa(sid) + " " + args)
		out, err := h.Command(ctx, line)
		if err != nil {
			return 0, err
		}
		if !strings.Contains(out, "New server registered") {
			if strings.Contains(out, "not compatible") || strings.Contains(out, "Unknown command") || strings.Contains(out, "dynamic server") {
				need.what = append(need.what, "add server "+id+" ("+firstLine(out)+")")
			}
			return 0, fmt.Errorf("add server %s: %s", id, firstLine(out))
		}
		changes++
		if strings.Contains(" "+h.opts.ServerArgs+" ", " check ") {
			if err := h.expect(ctx, "enable health "+id, ""); err != nil {
				return changes, err
			}
		}
		srv = server{name: w.name(), addr: w.addr, port: w.o.Port, admin: adminFMaint, uweight: -1, iweight: -1, id: sid, added: true} // dynamic servers start in maintenance
		servers[w.name()] = srv
	} else if srv.addr != w.addr || srv.port != w.o.Port {
		out, err := h.Command(ctx, "set server "+id+" addr "+w.addr+" port "+w.o.Port)
		if err != nil {
			return 0, err
		}
		if !strings.Contains(out, "changed") && !strings.Contains(out, "no need to change") {
			return 0, fmt.Errorf("set server %s addr: %s", id, firstLine(out))
		}
		changes++
	}
	if want := cmp.Or(w.weight, srv.iweight); want > 0 && srv.uweight != want && (w.weight > 0 || srv.uweight >= 0) {
		if err := h.expect(ctx, "set server "+id+" weight "+strconv.Itoa(want), ""); err != nil {
			return changes, err
		}
		srv.uweight = want
		servers[w.name()] = srv
		changes++
	}
	cur := "ready"
	switch {
	case srv.admin&adminFMaint != 0:
		cur = "maint"
	case srv.admin&adminFDrain != 0:
		cur = "drain"
	}
	if cur != w.state {
		if err := h.expect(ctx, "set server "+id+" state "+w.state, ""); err != nil {
			return changes, err
		}
		changes++
	}
	return changes, nil
}

// expect sends line and checks the answer is want.
func (h *HAProxy) expect(ctx context.Context, line, want string) error {
	out, err := h.Command(ctx, line)
	if err != nil {
		return err
	}
	if out != want {
		return fmt.Errorf("%s: %s", line, firstLine(out))
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func sortedKeys(m map[string]server) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slicesSort(keys)
	return keys
}

// resolve returns host's address: itself when it is an IP, else the first
// IPv4 address the system resolver gives (the first IPv6 one without).
func resolve(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolving %s: %w", host, err)
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("resolving %s: no address", host)
	}
	return addrs[0], nil
}
