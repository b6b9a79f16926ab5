package direct

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// Version is the plugin's version, reported by Info.
const Version = "0.1.0"

// DefaultConcurrency is the number of probes in flight when the
// configuration does not say.
const DefaultConcurrency = 64

// MaxConcurrency bounds the concurrency attribute.
const MaxConcurrency = 10000

// DefaultVoter is the voter id of the votes unless configured.
const DefaultVoter = "direct"

// Source is the direct vote source. The zero value is not ready: use New.
type Source struct {
	log         hclog.Logger
	concurrency int
	voter       string
}

// New returns a Source with the default settings.
func New(log hclog.Logger) *Source {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Source{log: log, concurrency: DefaultConcurrency, voter: DefaultVoter}
}

// Info implements sdk.BasePlugin.
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-direct", Version: Version}, nil
}

// ConfigSchema implements sdk.BasePlugin.
func (s *Source) ConfigSchema(context.Context) (sdk.Schema, error) {
	return sdk.Schema{Attributes: []sdk.Attribute{
		{Name: "concurrency", Type: sdk.TypeNumber, Description: fmt.Sprintf("Probes in flight at once (default %d).", DefaultConcurrency)},
		{Name: "voter", Type: sdk.TypeString, Description: fmt.Sprintf("Voter id of the votes (default %q).", DefaultVoter)},
	}}, nil
}

// Configure implements sdk.BasePlugin.
func (s *Source) Configure(_ context.Context, cfg sdk.Config) error {
	var diags sdk.Diagnostics
	concurrency, voter := DefaultConcurrency, DefaultVoter
	if n, ok := cfg.Number("concurrency"); ok {
		if n != math.Trunc(n) || n < 1 || n > MaxConcurrency {
			diags = append(diags, sdk.AttributeError("concurrency", "Invalid concurrency",
				fmt.Sprintf("concurrency = %v: use a whole number from 1 to %d (probes in flight at once).", n, MaxConcurrency)))
		} else {
			concurrency = int(n)
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
	s.concurrency, s.voter = concurrency, voter
	return nil
}

// Vote implements sdk.VoteSource: it probes every target, at most
// s.concurrency at a time, and casts one vote per probe that ran.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	ctx, cancel := softDeadline(ctx)
	defer cancel()
	results := make([]sdk.Vote, len(ballot.Targets))
	voted := make([]bool, len(ballot.Targets))
	var next atomic.Int64
	var invalid, unrun atomic.Int64
	workers := min(s.concurrency, len(ballot.Targets))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ballot.Targets) || ctx.Err() != nil {
					return
				}
				t := &ballot.Targets[i]
				res, err := probe.Do(ctx, probe.Request{
					Address:          t.Address,
					Host:             t.Host,
					Path:             t.Path,
					Timeout:          t.Timeout,
					UserAgent:        t.UserAgent,
					ExpectedStatuses: t.Expect.Statuses,
					ExpectedBody:     t.Expect.BodyContains,
					MaxLatency:       t.Expect.MaxLatency,
				})
				if err != nil {
					if ctx.Err() != nil {
						unrun.Add(1)
					} else {
						invalid.Add(1)
						s.log.Warn("target not probed", "site", t.Site, "origin", t.Origin, "error", err)
					}
					continue
				}
				results[i] = s.vote(t, res)
				voted[i] = true
			}
		})
	}
	wg.Wait()
	votes := make([]sdk.Vote, 0, len(results))
	for i, ok := range voted {
		if ok {
			votes = append(votes, results[i])
		}
	}
	if n := len(ballot.Targets) - len(votes); n > 0 {
		s.log.Warn("abstained on some targets", "round", ballot.Round, "targets", len(ballot.Targets),
			"invalid", invalid.Load(), "out_of_time", int64(n)-invalid.Load())
	}
	return votes, nil
}

func (s *Source) vote(t *sdk.Target, res probe.Result) sdk.Vote {
	reason, ok := sdk.ParseReason(string(res.Reason))
	if !ok {
		reason = sdk.ReasonError
	}
	v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Down, Reason: reason, Detail: res.Detail, Latency: res.Latency}
	if res.Up {
		v.Value = sdk.Up
	}
	return v
}

// softDeadline ends probing a little before the call's deadline (a tenth
// of the time left, at most a second) so that the votes already cast get
// back to vigil in time.
func softDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(time.Until(dl)/10, time.Second)
	return context.WithDeadline(ctx, dl.Add(-margin))
}
