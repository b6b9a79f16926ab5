package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// AccessLogFormat is the nginx log_format whose lines vigil-node reads
// (-passive-from nginx-log:PATH); builtin:nginx declares it (as "vigil")
// with the template var access_log. One JSON object a line.
const AccessLogFormat = `escape=json '{"upstream_addr":"$upstream_addr","upstream_status":"$upstream_status",` +
	`"upstream_response_time":"$upstream_response_time","upstream_retry_after":"$upstream_http_retry_after",` +
	`"request_method":"$request_method","uri":"$uri"}'`

// VarnishncsaFormat is the varnishncsa -F format (with -b for backend
// requests and -j for JSON escapes) that writes AccessLogFormat's lines:
// one per backend fetch, a retry (return (retry)) its own line. A fetch
// whose connection failed has no BackendOpen record, so its line has no
// address and counts for no origin.
const VarnishncsaFormat = `{"upstream_addr":"%{VSL:BackendOpen[3]}x:%{VSL:BackendOpen[4]}x","upstream_status":"%s",` +
	`"upstream_response_time":"%{Varnish:time_firstbyte}x","upstream_retry_after":"%{Retry-After}o",` +
	`"request_method":"%m","uri":"%U"}`

// maxLogLine bounds one line of the access log; a longer one is skipped.
const maxLogLine = 64 << 10

// accessLine is one line of AccessLogFormat.
type accessLine struct {
	UpstreamAddr         *string `json:"upstream_addr"`
	UpstreamStatus       string  `json:"upstream_status"`
	UpstreamResponseTime string  `json:"upstream_response_time"`
	UpstreamRetryAfter   string  `json:"upstream_retry_after"`
	Method               string  `json:"request_method"`
	URI                  string  `json:"uri"`
}

// logAttempt is one upstream attempt of a logged request.
type logAttempt struct {
	// Addr is the upstream's address as nginx logs it (host:port).
	Addr string
	// Status is the upstream's status, 0 when none came.
	Status     int
	RetryAfter bool
	// Latency is the attempt's upstream_response_time (-1: unknown).
	Latency      time.Duration
	Method, Path string
}

// attempt is the proxy's Attempt of at, at the origin address.
func (at logAttempt) attempt(address string) proxy.Attempt {
	pa := proxy.Attempt{Address: address, Status: at.Status, RetryAfter: at.RetryAfter, Method: at.Method, Path: at.Path}
	if at.Status == 0 {
		pa.Err = "connect_error"
	}
	if at.Latency >= 0 {
		pa.Latency = at.Latency
	}
	return pa
}

// upstreamList splits one of nginx's $upstream_* values: attempts are
// separated by ", ", and the upstream groups of an internal redirect by
// " : ".
func upstreamList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for _, group := range strings.Split(s, " : ") {
		for _, v := range strings.Split(group, ",") {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// parseAccessLine reads one line of AccessLogFormat: the request's
// upstream attempts, in order, each an outcome for its upstream. A
// request nginx answered itself (no upstream) has none. An attempt whose
// address is not host:port (an upstream group's name, when none of its
// servers was up; a unix socket) is left out.
func parseAccessLine(line []byte) ([]logAttempt, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	var l accessLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, fmt.Errorf("not a JSON line of log_format vigil: %w", err)
	}
	if l.UpstreamAddr == nil {
		return nil, errors.New("no upstream_addr: the access_log must use log_format vigil (see plugins/node/README.md)")
	}
	addrs := upstreamList(*l.UpstreamAddr)
	if len(addrs) == 0 || len(addrs) == 1 && addrs[0] == "-" {
		return nil, nil
	}
	statuses, times, retry := upstreamList(l.UpstreamStatus), upstreamList(l.UpstreamResponseTime), upstreamList(l.UpstreamRetryAfter)
	if len(statuses) != len(addrs) {
		return nil, fmt.Errorf("%d upstream addresses but %d statuses", len(addrs), len(statuses))
	}
	path := l.URI
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	out := make([]logAttempt, 0, len(addrs))
	for i, addr := range addrs {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" || strings.HasPrefix(addr, "unix:") {
			continue
		}
		at := logAttempt{Addr: addr, Latency: -1, Method: l.Method, Path: path}
		if n, err := strconv.Atoi(statuses[i]); err == nil && n >= 100 && n <= 599 {
			at.Status = n
		}
		if i < len(times) {
			if f, err := strconv.ParseFloat(times[i], 64); err == nil && f >= 0 && f < 1e6 {
				at.Latency = time.Duration(f * float64(time.Second))
			}
		}
		if i < len(retry) && retry[i] != "" && retry[i] != "-" {
			at.RetryAfter = true
		}
		out = append(out, at)
	}
	return out, nil
}

// tailer follows a log file as logrotate and nginx handle it: the lines
// appended since the last read; a file renamed away (rotation by rename,
// then nginx -s reopen) is read to its end, then the new file at the path
// from its start; a file truncated (copytruncate) is read again from its
// start. The first open starts at the file's end: what was logged before
// vigil-node looked is not counted.
type tailer struct {
	path string
	f    *os.File
	off  int64
	// started says the path was opened once: files opened later (after a
	// rotation) are read from their start.
	started bool
	partial []byte
	// skipping drops the rest of a line longer than maxLogLine.
	skipping bool
	buf      []byte
}

func newTailer(path string) *tailer { return &tailer{path: path, buf: make([]byte, 32<<10)} }

// poll reads what was appended and calls line for each whole line.
func (t *tailer) poll(line func([]byte)) error {
	if t.f == nil {
		f, err := os.Open(t.path)
		if errors.Is(err, fs.ErrNotExist) {
			t.started = true // a file that appears later is all new
			return nil
		}
		if err != nil {
			return fmt.Errorf("opening the access log: %w", err)
		}
		t.f, t.off, t.partial, t.skipping = f, 0, t.partial[:0], false
		if !t.started {
			if t.off, err = f.Seek(0, io.SeekEnd); err != nil {
				return fmt.Errorf("access log %s: %w", t.path, err)
			}
		}
		t.started = true
	}
	if err := t.read(line); err != nil {
		return err
	}
	cur, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("access log %s: %w", t.path, err)
	}
	switch at, err := os.Stat(t.path); {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("access log %s: %w", t.path, err)
	case err != nil || !os.SameFile(at, cur):
		// Rotated away: the old file was read to its end above (nginx may
		// still append to it until it reopens its logs, a few lines lost
		// at most); the new one, if any, is read from its start.
		_ = t.f.Close()
		t.f = nil
		return t.poll(line)
	case cur.Size() < t.off:
		// Truncated in place: read again from the start.
		if _, err := t.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("access log %s: %w", t.path, err)
		}
		t.off, t.partial, t.skipping = 0, t.partial[:0], false
		return t.read(line)
	}
	return nil
}

// read reads t.f to its end.
func (t *tailer) read(line func([]byte)) error {
	for {
		n, err := t.f.Read(t.buf)
		t.off += int64(n)
		data := t.buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				if !t.skipping {
					t.partial = append(t.partial, data...)
					if len(t.partial) > maxLogLine {
						t.partial, t.skipping = t.partial[:0], true
					}
				}
				break
			}
			if !t.skipping {
				t.partial = append(t.partial, data[:i]...)
				if len(t.partial) <= maxLogLine {
					line(t.partial)
				}
			}
			t.partial, t.skipping = t.partial[:0], false
			data = data[i+1:]
		}
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the access log %s: %w", t.path, err)
		}
	}
}

func (t *tailer) close() {
	if t.f != nil {
		_ = t.f.Close()
		t.f = nil
	}
}

// upstreamAddresses maps the host:port of every origin of v (as nginx's
// $upstream_addr writes a server of builtin:nginx) to its address as
// published. nginx logs the IP it connected to: an origin named by a
// hostname is mapped by the addresses resolve gives for it too (when
// resolve is not nil), as nginx resolved it when it loaded its
// configuration.
func upstreamAddresses(v *edge.View, resolve func(host string) []netip.Addr) map[string]string {
	m := map[string]string{}
	add := func(os []edge.Origin) {
		for _, o := range os {
			if _, ok := m[o.HostPort]; !ok {
				m[o.HostPort] = o.Address
			}
			if _, err := netip.ParseAddr(o.Host); err == nil || resolve == nil {
				continue
			}
			for _, ip := range resolve(o.Host) {
				if hp := net.JoinHostPort(ip.Unmap().String(), o.Port); m[hp] == "" {
					m[hp] = o.Address
				}
			}
		}
	}
	for _, s := range v.Sites {
		add(s.Origins)
		if s.Ramp != nil {
			add(s.Ramp.Origins)
		}
		add(s.Backup)
		add(s.Others)
	}
	return m
}

// lookupHost resolves an origin's hostname with the system's resolver
// within ctx; nothing when it fails.
func lookupHost(ctx context.Context) func(string) []netip.Addr {
	return func(host string) []netip.Addr {
		ips, _ := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		return ips
	}
}

// resolveBudget bounds the lookups of a publication's hostnames, all of
// them: the log is not read meanwhile.
const resolveBudget = 5 * time.Second

// feedAccessLog tails the access log at path every interval and adds each
// logged upstream attempt to its origin's passive window, as the proxy's
// attempts are: the passive ignore list applies (503-retry-after through
// upstream_retry_after), and so does the slow limit (through
// upstream_response_time). A status of 502 or 504 that nginx wrote for a
// connection it could not make counts as the 5xx it is in the log.
func (a *Agent) feedAccessLog(ctx context.Context, path string, interval time.Duration) {
	t := newTailer(path)
	defer t.close()
	var addrs map[string]string
	var addrsOf *publication.Snapshot
	bad, failing := 0, false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if snap := a.current.Load(); snap != addrsOf {
			addrsOf, addrs = snap, nil
			if snap != nil {
				v, _ := edge.Build(snap, nil, a.cfg.Edge.Prefix, nil)
				rctx, cancel := context.WithTimeout(ctx, resolveBudget)
				addrs = upstreamAddresses(v, lookupHost(rctx))
				cancel()
			}
		}
		err := t.poll(func(line []byte) {
			ats, err := parseAccessLine(line)
			if err != nil {
				if bad == 0 {
					a.log.Warn("access log line unusable: the passive windows skip such lines (logged once)", "path", path, "error", err)
				}
				bad++
				return
			}
			for _, at := range ats {
				addr, ok := addrs[at.Addr]
				if !ok {
					continue
				}
				a.passive.record(at.attempt(addr))
			}
		})
		switch {
		case err != nil && !failing:
			a.log.Warn("access log unread: its passive windows get nothing until it is (retried every interval)", "error", err)
			failing = true
		case err == nil && failing:
			a.log.Info("access log read again", "path", path)
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
