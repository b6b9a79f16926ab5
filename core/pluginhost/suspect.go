package pluginhost

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

// Bounds on what a plugin's suspects (sdk.SuspectReporter) can make the
// host do. A suspect is passed to Spec.OnSuspect only when its site's name
// is at most sdk.MaxSuspectName bytes and was in a ballot handed to this
// source since it was created, and only within MaxSuspectsPerSecond: a
// plugin that floods, or names sites it was never asked about, costs a
// counter (Stats.DroppedSuspects) and a warning a minute, nothing more.
const (
	// MaxSuspectsPerSecond is the most suspects of one source passed on in
	// any one second; the rest of that second's are dropped.
	MaxSuspectsPerSecond = 10
	// maxKnownSites bounds the site names remembered from ballots (sites
	// come from the configuration: this is far above any real one).
	maxKnownSites = 1 << 20
	// dropWarnEvery is how often dropped suspects are logged, at most.
	dropWarnEvery = time.Minute
)

// suspects is a Source's side of its plugin's suspect stream.
type suspects struct {
	mu       sync.Mutex
	known    map[string]struct{} // sites of the ballots so far
	window   time.Time           // the second MaxSuspectsPerSecond counts in
	inWindow int
	lastWarn time.Time
	dropped  map[string]int // why -> how many, since the last warning
	now      func() time.Time
}

// wantsSuspects reports whether the ballot's sites are worth remembering: there
// is somewhere to pass suspects to.
func (s *Source) wantsSuspects() bool { return s.spec.OnSuspect != nil }

// remember records the ballot's sites as ones the plugin may suspect.
func (s *Source) remember(ballot *sdk.Ballot) {
	if !s.wantsSuspects() || len(ballot.Targets) == 0 {
		return
	}
	sp := &s.sus
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.known == nil {
		sp.known = map[string]struct{}{}
	}
	prev := ""
	for i := range ballot.Targets {
		site := ballot.Targets[i].Site
		if site == prev { // a site's origins come together: one lookup each
			continue
		}
		prev = site
		if _, ok := sp.known[site]; !ok && len(sp.known) < maxKnownSites {
			sp.known[site] = struct{}{}
		}
	}
}

// suspect passes one of the plugin's suspects to Spec.OnSuspect, or drops
// and counts it.
func (s *Source) suspect(sus sdk.Suspect) {
	why := s.admit(sus.Site)
	if why != "" {
		s.stats.droppedSuspects.Add(1)
		return
	}
	s.stats.suspects.Add(1)
	s.log.Debug("plugin suspects a site; passing it on for an early round", "site", sus.Site, "origin", clipTo(sus.Origin, sdk.MaxSuspectName),
		"detail", clipTo(sus.Detail, sdk.MaxSuspectName))
	s.spec.OnSuspect(sus.Site)
}

// admit returns why a suspect of site is dropped, or "" to pass it on.
func (s *Source) admit(site string) (why string) {
	sp := &s.sus
	sp.mu.Lock()
	defer sp.mu.Unlock()
	now := time.Now()
	if sp.now != nil {
		now = sp.now()
	}
	defer func() {
		if why == "" {
			return
		}
		if sp.dropped == nil {
			sp.dropped = map[string]int{}
		}
		sp.dropped[why]++
		if now.Sub(sp.lastWarn) < dropWarnEvery {
			return
		}
		args := make([]any, 0, 2*len(sp.dropped))
		for k, n := range sp.dropped {
			args = append(args, k, n)
		}
		sp.lastWarn, sp.dropped = now, nil
		s.log.Warn("suspects of the plugin dropped (this message comes at most once a minute)", args...)
	}()
	_, known := sp.known[site]
	switch {
	case s.spec.OnSuspect == nil:
		return "no_receiver"
	case site == "" || len(site) > sdk.MaxSuspectName:
		return "invalid_name"
	case !known:
		return "site_not_in_a_ballot"
	}
	if now.Sub(sp.window) >= time.Second {
		sp.window, sp.inWindow = now, 0
	}
	if sp.inWindow >= MaxSuspectsPerSecond {
		return "over_rate"
	}
	sp.inWindow++
	return ""
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// watch opens proc's suspect stream, when its plugin reports suspects,
// and keeps it open until the process ends: a broken stream is opened
// again after a backoff of MinBackoff doubling to MaxBackoff (from
// MinBackoff again once a stream delivered something).
func (s *Source) watch(proc *process) {
	w, ok := proc.src.(host.SuspectWatcher)
	if !ok {
		return
	}
	lo, hi := s.spec.MinBackoff, s.spec.MaxBackoff
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	if hi <= 0 {
		hi = DefaultMaxBackoff
	}
	go func() {
		ctx := proc.watching
		b := &backoff.ExponentialBackOff{InitialInterval: lo, RandomizationFactor: 0.1, Multiplier: 2, MaxInterval: hi}
		b.Reset()
		for {
			got := false
			err := w.WatchSuspects(ctx, func(sus sdk.Suspect) {
				got = true
				s.suspect(sus)
			})
			switch {
			case ctx.Err() != nil:
				return
			case proc.client.Exited():
				return // the next call restarts the plugin, and a new stream with it
			case errors.Is(err, sdk.ErrNoSuspects):
				s.log.Debug("the plugin reports no suspects")
				return
			}
			if got {
				b.Reset()
			}
			wait := b.NextBackOff()
			if errors.Is(err, io.EOF) {
				s.log.Debug("the plugin ended its suspect stream; asking again later", "in", wait)
			} else {
				s.log.Warn("suspect stream broke; opening it again later", "error", err, "in", wait)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}
