package nodeagent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// The sources of the passive windows (Config.PassiveFrom).
const (
	// PassiveFromProxy: vigil-node's own proxy's requests (-proxy-listen).
	PassiveFromProxy = "proxy"
	// PassiveFromHAProxy: the counters of the HAProxy vigil-node drives
	// (-haproxy-socket), read every Config.PassiveInterval.
	PassiveFromHAProxy = "haproxy"
	// PassiveFromNginxLog is the prefix of "nginx-log:PATH": nginx's JSON
	// access log at PATH (log_format vigil of builtin:nginx), tailed.
	PassiveFromNginxLog = "nginx-log:"
	// PassiveFromAccessLog is the prefix of "access-log:PATH", the same
	// reader under a name for any edge that writes AccessLogFormat's
	// lines (varnishncsa with VarnishncsaFormat).
	PassiveFromAccessLog = "access-log:"
	// PassiveFromNone: no passive window at all.
	PassiveFromNone = "none"
)

// DefaultPassiveInterval is how often the HAProxy counters and the access
// log are read into the passive windows.
const DefaultPassiveInterval = time.Second

// ParsePassiveFrom checks a -passive-from list ("proxy", "haproxy",
// "nginx-log:PATH", comma-separated, or "none") and returns its entries;
// "" is nil (each driver's default, see Config.PassiveFrom).
func ParsePassiveFrom(s string) ([]string, error) {
	if s = strings.TrimSpace(s); s == "" {
		return nil, nil
	}
	if s == PassiveFromNone {
		return []string{}, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == PassiveFromProxy, f == PassiveFromHAProxy:
		case strings.HasPrefix(f, PassiveFromNginxLog), strings.HasPrefix(f, PassiveFromAccessLog):
			if logPath(f) == "" {
				return nil, fmt.Errorf("-passive-from %q: write nginx-log:PATH (or access-log:PATH), the file of nginx's access_log with log_format vigil, or of varnishncsa (see plugins/node/README.md)", f)
			}
		case f == PassiveFromNone:
			return nil, fmt.Errorf("-passive-from %q: none stands alone (no passive window); leave it out of a list", s)
		default:
			return nil, fmt.Errorf("-passive-from %q: use proxy (vigil-node's own proxy), haproxy (the counters of -haproxy-socket's HAProxy), nginx-log:PATH or access-log:PATH (a JSON access log of nginx or varnishncsa), a comma-separated list of them, or none", f)
		}
		if seen[f] {
			return nil, fmt.Errorf("-passive-from %q: %s is listed twice", s, f)
		}
		seen[f] = true
		out = append(out, f)
	}
	return out, nil
}

// passiveSources resolves Config.PassiveFrom against what the node does:
// nil means proxy when it proxies and haproxy when it drives an HAProxy.
// It returns the HAProxy driver to read and the access logs to tail, and
// says whether the proxy feeds the windows.
func passiveSources(cfg Config) (proxyFeeds bool, ha *edge.HAProxy, logs []string, err error) {
	for _, d := range cfg.Edges {
		if h, ok := d.(*edge.HAProxy); ok && ha == nil {
			ha = h
		}
	}
	if cfg.PassiveFrom == nil {
		return cfg.ProxyListen != "", ha, nil, nil
	}
	found := ha
	ha = nil
	for _, f := range cfg.PassiveFrom {
		switch {
		case f == PassiveFromProxy:
			if cfg.ProxyListen == "" {
				return false, nil, nil, fmt.Errorf("-passive-from proxy needs -proxy-listen: the windows are fed by vigil-node's own proxy")
			}
			proxyFeeds = true
		case f == PassiveFromHAProxy:
			if found == nil {
				return false, nil, nil, fmt.Errorf("-passive-from haproxy needs -haproxy-socket: the windows are fed by the counters of the HAProxy vigil-node drives")
			}
			ha = found
		case logPath(f) != "":
			logs = append(logs, logPath(f))
		default:
			return false, nil, nil, fmt.Errorf("-passive-from %q: use proxy, haproxy, nginx-log:PATH or access-log:PATH", f)
		}
	}
	return proxyFeeds, ha, logs, nil
}

// logPath is the PATH of a -passive-from entry nginx-log:PATH or
// access-log:PATH, "" for any other.
func logPath(f string) string {
	if p, ok := strings.CutPrefix(f, PassiveFromNginxLog); ok {
		return p
	}
	p, _ := strings.CutPrefix(f, PassiveFromAccessLog)
	if p == f {
		return ""
	}
	return p
}

// statsReader reads HAProxy's counters (edge.HAProxy.Stats); tests replace
// it.
type statsReader interface {
	Stats(ctx context.Context) (string, []edge.ServerStats, error)
}

// feedHAProxy reads h's server counters every interval and adds their
// deltas to the origins' passive windows: per request, a 1xx to 4xx
// response is a success (a 429 among them), a 5xx from the server a
// failure, and a connection that failed or a response that never came
// (econ, wretr, eresp) a failure of the timeout kind. The first read is a
// baseline; a reload or a restart of HAProxy (a new process), a server
// added again, or a counter that went back counts from 0 (edge.StatsTracker).
func (a *Agent) feedHAProxy(ctx context.Context, h statsReader, interval time.Duration) {
	var tr edge.StatsTracker
	var addrs map[string]string
	var addrsOf *publication.Snapshot
	failing := false
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		proc, stats, err := h.Stats(ctx)
		if err != nil {
			if !failing && ctx.Err() == nil {
				a.log.Warn("HAProxy's counters unread: its passive windows get nothing until they are (retried every interval)", "error", err, "interval", interval.String())
			}
			failing = true
			continue
		}
		if failing {
			a.log.Info("HAProxy's counters read again: its passive windows are fed")
			failing = false
		}
		deltas, rs := tr.Update(proc, stats)
		if rs.Process || rs.Servers > 0 {
			a.log.Debug("HAProxy's counters started again: counted from 0", "new_process", rs.Process, "servers", rs.Servers)
		}
		if snap := a.current.Load(); snap != addrsOf {
			addrsOf, addrs = snap, nil
			if snap != nil {
				v, _ := edge.Build(snap, nil, a.cfg.Edge.Prefix, nil)
				addrs = edge.ServerAddresses(v)
			}
		}
		for key, o := range deltas {
			if addr, ok := addrs[key]; ok {
				a.passive.recordCounts(addr, o)
			}
		}
	}
}

// recordCounts adds o's outcomes to address's window, spread evenly in
// time order (the latest of a window are what it counts), and scaled down
// to the window's size when there are more: a window then holds them in
// the same proportions. The passive ignore list does not apply: HAProxy's
// counters tell no status within a class, nor Retry-After.
func (p *passive) recordCounts(address string, o edge.Outcomes) {
	total := o.Total()
	if total == 0 {
		return
	}
	counts := [3]uint64{o.OK, o.Status5xx, o.Errors}
	kinds := [3]uint8{kindOK, kind5xx, kindTimeout}
	n := min(total, uint64(p.size))
	if n < total {
		// Largest remainders, so that the scaled counts add up to n.
		var scaled [3]uint64
		var sum uint64
		for i, c := range counts {
			scaled[i] = c * n / total
			sum += scaled[i]
		}
		for sum < n {
			best, bestRem := 0, uint64(0)
			for i, c := range counts {
				if rem := c*n - scaled[i]*total; rem > bestRem || rem == bestRem && c > counts[best] {
					best, bestRem = i, rem
				}
			}
			scaled[best]++
			sum++
		}
		counts = scaled
	}
	w := p.window(address)
	at := p.now().UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	// Evenly interleaved: at each step, the kind furthest behind its share.
	var done [3]uint64
	for step := uint64(1); step <= n; step++ {
		best, bestLag := -1, int64(0)
		for i, c := range counts {
			if done[i] >= c {
				continue
			}
			lag := int64(c*step) - int64(done[i]*n)
			if best < 0 || lag > bestLag {
				best, bestLag = i, lag
			}
		}
		done[best]++
		w.add(outcome{at: at, kind: kinds[best]})
	}
}

// window returns address's window, made when there is none.
func (p *passive) window(address string) *window {
	p.mu.RLock()
	w := p.m[address]
	p.mu.RUnlock()
	if w != nil {
		return w
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w = p.m[address]; w == nil {
		w = &window{ring: make([]outcome, p.size)}
		p.m[address] = w
	}
	return w
}
