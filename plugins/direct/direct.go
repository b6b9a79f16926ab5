package direct

import (
	"context"
	"crypto/x509"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/errgroup"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// Version is the plugin's version, reported by Info.
const Version = "0.2.0"

// MaxConcurrency bounds the concurrency attribute.
const MaxConcurrency = 100000

// DefaultMaxConcurrency is the most probes in flight when the configuration
// does not say (the file-descriptor limit may lower it).
const DefaultMaxConcurrency = 4096

// DefaultSpread is the part of the round's time over which the probes'
// starts are spread, when the configuration does not say: a fleet of
// sources must not hit the origins in one burst.
const DefaultSpread = 0.1

// fdReserve is how many file descriptors the plugin keeps for itself
// (its gRPC link, logs, DNS) beside the probes' connections.
const fdReserve = 64

// DefaultVoter is the voter id of the votes unless configured.
const DefaultVoter = "direct"

// Source is the direct vote source. The zero value is not ready: use New.
type Source struct {
	log         hclog.Logger
	concurrency int // the most probes in flight; 0: derived
	spread      float64
	voter       string
	fdLimit     func() int
	now         func() time.Time

	rounds atomic.Uint64

	mu      sync.Mutex
	cutLast map[targetKey]bool // the targets the last round ran out of time for
}

type targetKey struct{ site, origin string }

// New returns a Source with the default settings.
func New(log hclog.Logger) *Source {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Source{log: log, spread: DefaultSpread, voter: DefaultVoter, fdLimit: openFileLimit, now: time.Now}
}

// Info implements sdk.BasePlugin. Every target is checked with sdk/probe,
// which honours each of its settings, and what the round leaves no time
// for is an abstention: the probe's capabilities.
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-direct", Version: Version, Capabilities: sdk.ProbeCapabilities()}, nil
}

// ConfigSchema implements sdk.BasePlugin.
func (s *Source) ConfigSchema(context.Context) (sdk.Schema, error) {
	return sdk.Schema{Attributes: []sdk.Attribute{
		{Name: "concurrency", Type: sdk.TypeNumber, Description: fmt.Sprintf(
			"The most probes in flight at once (default: as many as the round needs, up to %d and the open-file limit).", DefaultMaxConcurrency)},
		{Name: "spread", Type: sdk.TypeNumber, Description: fmt.Sprintf(
			"The part of the source's time in a round over which probe starts are spread, from 0 (all at once) to 0.5 (default %.1f).", DefaultSpread)},
		{Name: "voter", Type: sdk.TypeString, Description: fmt.Sprintf("Voter id of the votes (default %q).", DefaultVoter)},
	}}, nil
}

// Configure implements sdk.BasePlugin.
func (s *Source) Configure(_ context.Context, cfg sdk.Config) error {
	var diags sdk.Diagnostics
	concurrency, spread, voter := 0, DefaultSpread, DefaultVoter
	if n, ok := cfg.Number("concurrency"); ok {
		if n != math.Trunc(n) || n < 1 || n > MaxConcurrency {
			diags = append(diags, sdk.AttributeError("concurrency", "Invalid concurrency",
				fmt.Sprintf("concurrency = %v: use a whole number from 1 to %d (the most probes in flight at once), or leave it out to size it by the round.", n, MaxConcurrency)))
		} else {
			concurrency = int(n)
			if limit := s.fdLimit() - fdReserve; limit > 0 && concurrency > limit {
				s.log.Warn("concurrency is above what the open-file limit allows; probes beyond it would fail to connect, so it is lowered",
					"concurrency", concurrency, "open_file_limit", limit+fdReserve, "used", limit)
				concurrency = limit
			}
		}
	}
	if f, ok := cfg.Number("spread"); ok {
		if f < 0 || f > 0.5 || math.IsNaN(f) {
			diags = append(diags, sdk.AttributeError("spread", "Invalid spread",
				fmt.Sprintf("spread = %v: use a fraction from 0 (every probe at once) to 0.5 (starts spread over half of the source's time); 0.1 to 0.2 keeps a fleet from hitting origins in one burst.", f)))
		} else {
			spread = f
		}
	}
	if v, ok := cfg.String("voter"); ok {
		if !sdk.ValidVoter(v) {
			diags = append(diags, sdk.AttributeError("voter", "Invalid voter id",
				fmt.Sprintf("voter = %q: use 1 to 128 letters, digits and ._:-@/", v)))
		} else {
			voter = v
		}
	}
	if len(diags) > 0 {
		return diags
	}
	s.concurrency, s.spread, s.voter = concurrency, spread, voter
	return nil
}

// maxInFlight is the most probes that may be in flight: the configured
// concurrency, or the default bound, within the open-file limit.
func (s *Source) maxInFlight() int {
	limit := DefaultMaxConcurrency
	if s.concurrency > 0 {
		limit = s.concurrency
	}
	if fd := s.fdLimit() - fdReserve; fd > 0 && limit > fd {
		limit = fd
	}
	return max(1, limit)
}

// plan is how one round's ballot is probed.
type plan struct {
	order   []int         // the targets in the order they start (shuffled each round)
	spread  time.Duration // starts are spread evenly over this
	workers int           // targets waiting for their start or probed at once
}

// planRound works out the order, the spread and the number of workers for
// a ballot. Every target may have its own probe in flight (a black-holed
// origin costs a socket and a goroutine while it waits, nothing more), up
// to maxInFlight; needed is how many it takes for every target to end in
// time even when each origin uses its whole timeout.
func (s *Source) planRound(ballot sdk.Ballot, start, soft time.Time) (p plan, needed int) {
	n := len(ballot.Targets)
	p = plan{order: rand.Perm(n)}
	// The targets the last round ran out of time for start first: none is
	// cut twice in a row while others are probed.
	s.mu.Lock()
	if len(s.cutLast) > 0 {
		sort.SliceStable(p.order, func(a, b int) bool {
			ta, tb := &ballot.Targets[p.order[a]], &ballot.Targets[p.order[b]]
			return s.cutLast[targetKey{ta.Site, ta.Origin}] && !s.cutLast[targetKey{tb.Site, tb.Origin}]
		})
	}
	s.mu.Unlock()
	window := soft.Sub(start)
	longest := time.Duration(0)
	for i := range ballot.Targets {
		longest = max(longest, probeTimeout(&ballot.Targets[i]))
	}
	// The spread leaves the longest probe room to end in time.
	p.spread = max(0, min(time.Duration(float64(window)*s.spread), window-longest))
	perWorker := 1 // probes that all time out, one after the other
	if longest > 0 && window > longest {
		perWorker = int(window / longest)
	}
	needed = (n + perWorker - 1) / perWorker
	p.workers = max(1, min(n, s.maxInFlight()))
	return p, needed
}

func probeTimeout(t *sdk.Target) time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return probe.DefaultTimeout
}

// Vote implements sdk.VoteSource. It probes every target once, the starts
// spread over the first part of the time it has and in an order shuffled
// each round (the targets the last round ran out of time for first), with
// as many probes in flight as the round needs. A probe the deadline
// interrupts casts an Abstain with ReasonOutOfTime; since those targets
// start first next round, no target is cut twice in a row while others
// are probed.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	if len(ballot.Targets) == 0 {
		return nil, nil
	}
	ctx, cancel := sdk.SoftDeadline(ctx)
	defer cancel()
	start := s.now()
	soft, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		soft = start.Add(24 * time.Hour) // no deadline: no one is cut
	}
	roots, err := probe.Roots(ballot.CAs)
	if err != nil {
		s.log.Warn("a CA bundle of the ballot is unusable; its targets are checked against the system's roots", "error", err)
	}
	p, needed := s.planRound(ballot, start, soft)
	if !hasDeadline {
		p.spread = 0 // nothing to spread over
	}
	results := make([]sdk.Vote, len(ballot.Targets))
	var invalid, cut atomic.Int64
	// At most p.workers targets wait for their start or are probed at once,
	// started in p.order. A plain Group (no WithContext): a failed probe
	// cancels no other, each target gets its own vote.
	var g errgroup.Group
	g.SetLimit(p.workers)
	for k, i := range p.order {
		g.Go(func() error {
			t := &ballot.Targets[i]
			if wait := start.Add(p.spread * time.Duration(k) / time.Duration(len(p.order))).Sub(s.now()); wait > 0 {
				if !sleep(ctx, wait) {
					results[i] = s.outOfTime(t, "the round's time ran out before its turn")
					cut.Add(1)
					return nil
				}
			}
			// A probe that the round's end interrupts is no verdict (a
			// timeout shortened by the deadline would be a false down):
			// probe.Do then returns an error, and the vote is an Abstain.
			res, err := probe.Do(ctx, request(t, roots))
			if err != nil {
				if ctx.Err() != nil {
					results[i] = s.outOfTime(t, "the round's deadline came first")
					cut.Add(1)
				} else {
					invalid.Add(1)
					results[i] = sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Abstain, Reason: sdk.ReasonUnsupported, Detail: clip(err.Error())}
					s.log.Warn("target not probed", "site", t.Site, "origin", t.Origin, "error", err)
				}
				return nil
			}
			results[i] = s.vote(t, res)
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	cutNow := map[targetKey]bool{}
	for i := range results {
		if results[i].Value == sdk.Abstain && results[i].Reason == sdk.ReasonOutOfTime {
			cutNow[targetKey{ballot.Targets[i].Site, ballot.Targets[i].Origin}] = true
		}
	}
	s.mu.Lock()
	s.cutLast = cutNow
	s.mu.Unlock()
	round := s.rounds.Add(1)
	if n := cut.Load(); n > 0 || invalid.Load() > 0 {
		s.log.Warn("abstained on some targets", "round", ballot.Round, "targets", len(ballot.Targets),
			"out_of_time", n, "invalid", invalid.Load(), "in_flight_max", p.workers, "in_flight_needed", needed,
			"spread", p.spread.Round(time.Millisecond).String())
	} else if round == 1 || round%100 == 0 {
		s.log.Debug("round", "round", ballot.Round, "targets", len(ballot.Targets), "in_flight_max", p.workers,
			"spread", p.spread.Round(time.Millisecond).String(), "took", s.now().Sub(start).Round(time.Millisecond).String())
	}
	return results, nil
}

// request is the probe of a target.
func request(t *sdk.Target, roots map[string]*x509.CertPool) probe.Request {
	r := probe.Request{
		Address:            t.Address,
		Host:               t.Host,
		Path:               t.Path,
		Timeout:            t.Timeout,
		UserAgent:          t.UserAgent,
		ExpectedStatuses:   t.Expect.Statuses,
		ExpectedBody:       t.Expect.BodyContains,
		MaxLatency:         t.Expect.MaxLatency,
		ServerName:         t.TLS.ServerName,
		InsecureSkipVerify: t.TLS.InsecureSkipVerify,
		FollowRedirects:    t.FollowRedirects,
		MaxBody:            t.MaxBody,
	}
	if t.TLS.CA != "" {
		r.RootCAs = roots[t.TLS.CA]
	}
	if len(t.Headers) > 0 {
		r.Header = make(map[string][]string, len(t.Headers))
		for k, v := range t.Headers {
			r.Header[k] = []string{v}
		}
	}
	return r
}

func (s *Source) outOfTime(t *sdk.Target, why string) sdk.Vote {
	return sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Abstain, Reason: sdk.ReasonOutOfTime, Detail: why}
}

func (s *Source) vote(t *sdk.Target, res probe.Result) sdk.Vote {
	v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Down, Reason: res.Reason, Detail: res.Detail, Latency: res.Latency, HTTP: res.HTTP()}
	if res.Up {
		v.Value = sdk.Up
	}
	return v
}

// sleep waits d, or less when ctx ends first (then it reports false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
