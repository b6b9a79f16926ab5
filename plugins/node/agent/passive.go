package agent

import (
	"fmt"
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

type outcome struct {
	at   int64 // unix nanoseconds
	kind uint8
}

// window is one origin's ring of its latest attempts.
type window struct {
	mu   sync.Mutex
	ring []outcome
	next int // where the next attempt goes
	n    int // attempts held, at most len(ring)
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
	w.ring[w.next] = outcome{at: at, kind: k}
	w.next = (w.next + 1) % len(w.ring)
	w.n = min(w.n+1, len(w.ring))
	w.mu.Unlock()
}

// result counts address's window now: nil when it holds no attempt.
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

// keep forgets the windows of origins no longer published.
func (p *passive) keep(addresses map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a := range p.m {
		if !addresses[a] {
			delete(p.m, a)
		}
	}
}
