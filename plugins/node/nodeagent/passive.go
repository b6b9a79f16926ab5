package nodeagent

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "github.com/vigilcdn/vigil/plugins/node/internal/proto/nodegateway/v1"
	"github.com/vigilcdn/vigil/plugins/node/proxy"
)

// Defaults of PassiveConfig: the last 20 requests or 30s, whichever comes
// first; 429 and 503 with Retry-After are backpressure, not failures.
const (
	DefaultPassiveWindow = 20
	DefaultPassiveAge    = 30 * time.Second
	DefaultPassiveIgnore = "429,503-retry-after"
	// MaxPassiveWindow bounds PassiveConfig.Window.
	MaxPassiveWindow = 10000
)

// PassiveConfig tunes the passive windows: per origin, the outcomes of the
// proxy's real requests, sent to a gateway that reads them (the "passive"
// feature) beside the probe results.
type PassiveConfig struct {
	// Window is how many of the latest attempts a window holds (0:
	// DefaultPassiveWindow).
	Window int
	// Age drops attempts older than this (0: DefaultPassiveAge).
	Age time.Duration
	// Ignore lists the statuses that are backpressure, not failures: "429"
	// ignores every 429, "503-retry-after" a 503 with a Retry-After header.
	// Nil: DefaultPassiveIgnore; empty (not nil): none.
	Ignore []string
	// Slow, when positive, counts an answer later than this as slow, a
	// soft failure.
	Slow time.Duration
}

// ParsePassiveIgnore parses a -passive-ignore list such as
// "429,503-retry-after" ("none" or "": nothing is ignored).
func ParsePassiveIgnore(s string) ([]string, error) {
	out := []string{}
	if s = strings.TrimSpace(s); s == "" || s == "none" {
		return out, nil
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if _, err := parseIgnore(f); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// ignoreRule is one -passive-ignore entry.
type ignoreRule struct {
	status     int
	retryAfter bool // only with a Retry-After header
}

func parseIgnore(f string) (ignoreRule, error) {
	code, ra := strings.CutSuffix(f, "-retry-after")
	n, err := strconv.Atoi(code)
	if err != nil || n < 100 || n > 599 {
		return ignoreRule{}, fmt.Errorf("-passive-ignore entry %q: write a status (429) or a status with -retry-after (503-retry-after), comma-separated, or none", f)
	}
	return ignoreRule{status: n, retryAfter: ra}, nil
}

// The kinds of an attempt in a window.
const (
	kindOK uint8 = iota
	kind5xx
	kindTimeout // a timeout or a connection error
	kindIgnored
	kindSlow
)

// failed says an attempt of kind k counts as a failure (a soft one when
// slow).
func failed(k uint8) bool { return k == kind5xx || k == kindTimeout || k == kindSlow }

type outcome struct {
	at   int64 // unix nanoseconds
	kind uint8
}

// CanarySuccesses is how many canary requests in a row must succeed to
// clear a held window (see passive.serve).
const CanarySuccesses = 2

// canaryPaths is how many of the latest distinct paths of failed GET and
// HEAD requests a window keeps for its canaries.
const canaryPaths = 4

// window is one origin's ring of its latest attempts.
type window struct {
	mu   sync.Mutex
	ring []outcome
	next int // where the next attempt goes
	n    int // attempts held, at most len(ring)

	// held says the origin left the served set while its window held
	// failures: the window is kept, counted without the age limit, and
	// canaried, until CanarySuccesses canaries in a row succeed, the
	// origin is served again, or it leaves the configuration.
	held bool
	// hosts are the hostnames of the sites that served the origin, the
	// canary's Host header (the first).
	hosts []string
	// okRun counts the canaries in a row that succeeded.
	okRun int
	// asked says a gateway asked for the window (result): only then do
	// its passive votes exist, and only then is it canaried.
	asked bool
	// paths are the latest distinct paths (no query) of the GET and HEAD
	// requests that failed there, pathN of them, the next at pathNext;
	// the canaries ask for them in turn (canaryNext), or for CanaryPath
	// when there is none.
	paths                       [canaryPaths]string
	pathN, pathNext, canaryNext int
}

// notePath keeps path, that of a failed GET or HEAD, for the canaries.
// w.mu is held.
func (w *window) notePath(path string) {
	for _, p := range w.paths[:w.pathN] {
		if p == path {
			return
		}
	}
	w.paths[w.pathNext] = path
	w.pathNext = (w.pathNext + 1) % len(w.paths)
	w.pathN = min(w.pathN+1, len(w.paths))
}

// canaryPath is the path of the window's next canary. w.mu is held.
func (w *window) canaryPath() string {
	if w.pathN == 0 {
		return CanaryPath
	}
	p := w.paths[w.canaryNext%w.pathN]
	w.canaryNext++
	return p
}

func (w *window) add(o outcome) {
	w.ring[w.next] = o
	w.next = (w.next + 1) % len(w.ring)
	w.n = min(w.n+1, len(w.ring))
}

// failing says the window holds a failure newer than limit (unix
// nanoseconds). w.mu is held.
func (w *window) failing(limit int64) bool {
	for i := range w.n {
		o := w.ring[(w.next-1-i+2*len(w.ring))%len(w.ring)]
		if o.at <= limit {
			return false
		}
		if failed(o.kind) {
			return true
		}
	}
	return false
}

// passive holds the windows, by origin address as the publication gives it.
type passive struct {
	size   int
	age    time.Duration
	slow   time.Duration
	ignore []ignoreRule
	now    func() time.Time

	mu sync.RWMutex
	m  map[string]*window
	// served is, by address, the hostnames of the sites whose publication
	// serves the origin now (the last serve).
	served map[string][]string
	// gen counts the changes of the held windows (held, cleared,
	// forgotten), so that they are saved when it moves.
	gen uint64
}

func newPassive(cfg PassiveConfig, now func() time.Time) (*passive, error) {
	if cfg.Window < 0 || cfg.Window > MaxPassiveWindow {
		return nil, fmt.Errorf("-passive-window %d: use 1 to %d requests (0: %d)", cfg.Window, MaxPassiveWindow, DefaultPassiveWindow)
	}
	if cfg.Age < 0 || cfg.Slow < 0 {
		return nil, fmt.Errorf("-passive-window-age and -passive-slow must not be negative")
	}
	p := &passive{size: cfg.Window, age: cfg.Age, slow: cfg.Slow, now: now, m: map[string]*window{}}
	if p.size == 0 {
		p.size = DefaultPassiveWindow
	}
	if p.age == 0 {
		p.age = DefaultPassiveAge
	}
	if p.now == nil {
		p.now = time.Now
	}
	ignore := cfg.Ignore
	if ignore == nil {
		ignore, _ = ParsePassiveIgnore(DefaultPassiveIgnore)
	}
	for _, f := range ignore {
		r, err := parseIgnore(f)
		if err != nil {
			return nil, err
		}
		p.ignore = append(p.ignore, r)
	}
	return p, nil
}

// kind classifies an attempt.
func (p *passive) kind(a proxy.Attempt) uint8 {
	if a.Err != "" {
		return kindTimeout
	}
	for _, r := range p.ignore {
		if a.Status == r.status && (!r.retryAfter || a.RetryAfter) {
			return kindIgnored
		}
	}
	switch {
	case a.Status >= 500:
		return kind5xx
	case p.slow > 0 && a.Latency > p.slow:
		return kindSlow
	}
	return kindOK
}

// record adds an attempt to its origin's window (proxy.Options.OnAttempt).
func (p *passive) record(a proxy.Attempt) {
	k := p.kind(a)
	p.mu.RLock()
	w := p.m[a.Address]
	p.mu.RUnlock()
	if w == nil {
		p.mu.Lock()
		if w = p.m[a.Address]; w == nil {
			w = &window{ring: make([]outcome, p.size)}
			p.m[a.Address] = w
		}
		p.mu.Unlock()
	}
	at := p.now().UnixNano()
	w.mu.Lock()
	w.add(outcome{at: at, kind: k})
	if failed(k) && a.Path != "" && (a.Method == http.MethodGet || a.Method == http.MethodHead) {
		w.notePath(a.Path)
	}
	w.mu.Unlock()
}

// result counts address's window now: nil when it holds no attempt. A
// served origin's window counts its attempts of the last Age; a held one
// (its origin no longer served) counts them all, however old: it says what
// real traffic (and the canaries since) last saw there.
func (p *passive) result(address string) *pb.PassiveResult {
	p.mu.RLock()
	w := p.m[address]
	p.mu.RUnlock()
	if w == nil {
		return nil
	}
	limit := p.now().Add(-p.age).UnixNano()
	r := &pb.PassiveResult{}
	w.mu.Lock()
	w.asked = true
	if w.held {
		limit = math.MinInt64
	}
	for i := range w.n {
		o := w.ring[(w.next-1-i+2*len(w.ring))%len(w.ring)]
		if o.at <= limit {
			break // older still beyond: the ring is in time order
		}
		r.Requests++
		switch o.kind {
		case kind5xx:
			r.Failures++
		case kindTimeout:
			r.Failures++
			r.Timeouts++
		case kindIgnored:
			r.Ignored++
		case kindSlow:
			r.Slow++
		}
	}
	w.mu.Unlock()
	if r.Requests == 0 {
		return nil
	}
	return r
}

// serve takes the origins a new publication serves (served: by address,
// the hostnames of the sites serving it; see the package function served).
//
// The window of an origin served again becomes a live one (aged by Age).
// The window of an origin that left the served set is held when it holds
// a failure within Age: kept, counted without the age limit, and canaried
// (canaryTargets, canaried), so that its passive vote keeps saying what
// real traffic last saw there instead of falling silent at a failover. A
// window without a failure is forgotten, as nothing would be learnt from it.
func (p *passive) serve(served map[string][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	limit := p.now().Add(-p.age).UnixNano()
	for a, w := range p.m {
		w.mu.Lock()
		_, on := served[a]
		switch {
		case on && w.held:
			w.held, w.okRun, w.hosts = false, 0, nil
			p.gen++
		case on || w.held:
		case w.failing(limit):
			w.held, w.okRun, w.hosts = true, 0, p.served[a]
			p.gen++
		default:
			delete(p.m, a)
		}
		w.mu.Unlock()
	}
	p.served = served
}

// canaryTarget is a held window to canary: its origin's address, the Host
// header to send (empty: the address's host) and the path to ask for (not
// escaped, no query).
type canaryTarget struct {
	address, host, path string
}

// canaryTargets lists the held windows that a gateway asked for, by
// address: a node whose gateway casts no passive vote sends no canary.
func (p *passive) canaryTargets() []canaryTarget {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []canaryTarget
	for a, w := range p.m {
		w.mu.Lock()
		if w.held && w.asked {
			c := canaryTarget{address: a, path: w.canaryPath()}
			if len(w.hosts) > 0 {
				c.host = w.hosts[0]
			}
			out = append(out, c)
		}
		w.mu.Unlock()
	}
	slices.SortFunc(out, func(x, y canaryTarget) int { return strings.Compare(x.address, y.address) })
	return out
}

// canaried records a canary's outcome in a's window, if it is still held:
// a success counts toward CanarySuccesses in a row, and the last of them
// clears the window (it is forgotten: no evidence of failure remains); a
// failure (slow included) starts the count again; an ignored status
// (backpressure) leaves it. It says whether the window was cleared.
func (p *passive) canaried(a proxy.Attempt) (cleared bool) {
	k := p.kind(a)
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.m[a.Address]
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.held {
		return false
	}
	w.add(outcome{at: p.now().UnixNano(), kind: k})
	switch {
	case k == kindOK:
		w.okRun++
	case failed(k):
		w.okRun = 0
	}
	if w.okRun >= CanarySuccesses {
		delete(p.m, a.Address)
		p.gen++
		return true
	}
	return false
}

// held counts the held windows.
func (p *passive) held() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, w := range p.m {
		w.mu.Lock()
		if w.held {
			n++
		}
		w.mu.Unlock()
	}
	return n
}

// forget drops the held windows of origins that are not configured (by
// address: every enabled origin of every level of every site). It returns
// the addresses forgotten.
func (p *passive) forget(configured map[string]bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gone []string
	for a, w := range p.m {
		w.mu.Lock()
		if w.held && !configured[a] {
			delete(p.m, a)
			gone = append(gone, a)
			p.gen++
		}
		w.mu.Unlock()
	}
	slices.Sort(gone)
	return gone
}

// heldGen is the generation of the held windows: it moves whenever one
// is held, cleared or forgotten.
func (p *passive) heldGen() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.gen
}

// heldState returns the held windows, by address, to save, and the
// generation they are of.
func (p *passive) heldState() ([]heldWindow, uint64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []heldWindow
	for a, w := range p.m {
		w.mu.Lock()
		if w.held {
			h := heldWindow{Address: a, Hosts: w.hosts, Asked: w.asked, Paths: slices.Clone(w.paths[:w.pathN]),
				Attempts: make([]heldAttempt, 0, w.n)}
			for i := w.n - 1; i >= 0; i-- {
				o := w.ring[(w.next-1-i+2*len(w.ring))%len(w.ring)]
				h.Attempts = append(h.Attempts, heldAttempt{At: o.at, Kind: kindNames[o.kind]})
			}
			out = append(out, h)
		}
		w.mu.Unlock()
	}
	slices.SortFunc(out, func(x, y heldWindow) int { return strings.Compare(x.Address, y.Address) })
	return out, p.gen
}

// restore takes back held windows saved by a previous run (heldState):
// each is held again with its latest attempts (at most the window's
// size), unless a window of its origin exists already. Attempts of an
// unknown kind are left out, and so is a window left with none. It
// returns how many it restored.
func (p *passive) restore(held []heldWindow) int {
	kinds := make(map[string]uint8, len(kindNames))
	for k, name := range kindNames {
		kinds[name] = k
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range held {
		if h.Address == "" || p.m[h.Address] != nil {
			continue
		}
		w := &window{ring: make([]outcome, p.size), held: true, hosts: h.Hosts, asked: h.Asked}
		for _, at := range h.Attempts[max(0, len(h.Attempts)-p.size):] {
			if k, ok := kinds[at.Kind]; ok {
				w.add(outcome{at: at.At, kind: k})
			}
		}
		for _, path := range h.Paths {
			if strings.HasPrefix(path, "/") {
				w.notePath(path)
			}
		}
		if w.n > 0 {
			p.m[h.Address] = w
			n++
		}
	}
	return n
}
