package echo

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/vigilcdn/vigil/sdk"
)

// Source votes Up for every target and echoes the target into Detail.
// It is also an sdk.SuspectReporter: every target of a site whose name
// starts with "suspect" is reported as a suspect, to the watchers of the
// moment and to every later one.
type Source struct {
	voter string

	mu       sync.Mutex
	suspects []sdk.Suspect
	watchers map[chan sdk.Suspect]context.Context
}

// New returns a Source voting as "echo".
func New() *Source { return &Source{voter: "echo"} }

// Info implements sdk.BasePlugin.
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "echosource", Version: "0.0.1"}, nil
}

// ConfigSchema implements sdk.BasePlugin.
func (s *Source) ConfigSchema(context.Context) (sdk.Schema, error) {
	return sdk.Schema{Attributes: []sdk.Attribute{
		{Name: "voter", Type: sdk.TypeString, Description: "voter id"},
		{Name: "tags", Type: sdk.TypeStringList},
		{Name: "count", Type: sdk.TypeNumber},
		{Name: "wait", Type: sdk.TypeDuration},
		{Name: "on", Type: sdk.TypeBool},
	}}, nil
}

// Configure implements sdk.BasePlugin. A voter id that is not valid is
// rejected with a diagnostic on "voter"; a tag "bad" on its element.
func (s *Source) Configure(_ context.Context, cfg sdk.Config) error {
	var diags sdk.Diagnostics
	if v, ok := cfg.String("voter"); ok {
		if !sdk.ValidVoter(v) {
			diags = append(diags, sdk.AttributeError("voter", "Invalid voter id", fmt.Sprintf("%q has characters outside letters, digits and ._:-@/", v)))
		}
		s.voter = v
	}
	tags, _ := cfg.Strings("tags")
	for i, tag := range tags {
		if tag == "bad" {
			diags = append(diags, sdk.ElementError("tags", i, "Bad tag", "use another tag"))
		}
	}
	if n, ok := cfg.Number("count"); ok && n < 0 {
		diags = append(diags, sdk.AttributeError("count", "Negative count", "count must be >= 0"))
	}
	return diags.Err()
}

// Vote implements sdk.VoteSource.
func (s *Source) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	votes := make([]sdk.Vote, 0, len(b.Targets))
	for _, t := range b.Targets {
		if strings.HasPrefix(t.Site, "suspect") {
			s.suspect(sdk.Suspect{Site: t.Site, Origin: t.Origin, Detail: "round " + fmt.Sprint(b.Round)})
		}
		votes = append(votes, sdk.Vote{
			Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Up, Reason: sdk.ReasonOK,
			Detail: fmt.Sprintf("%s %s %s %s %v %s %v %q %v", t.Address, t.Host, t.Path, t.Timeout, b.Round, t.UserAgent,
				t.Expect.Statuses, t.Expect.BodyContains, t.Expect.MaxLatency),
			Latency: t.Timeout / 2,
		})
	}
	return votes, nil
}

// Suspects implements sdk.SuspectReporter: the suspects seen so far, then
// each new one, until ctx ends.
func (s *Source) Suspects(ctx context.Context) <-chan sdk.Suspect {
	ch := make(chan sdk.Suspect, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sus := range s.suspects {
		select {
		case ch <- sus:
		default:
		}
	}
	if s.watchers == nil {
		s.watchers = map[chan sdk.Suspect]context.Context{}
	}
	s.watchers[ch] = ctx
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	return ch
}

func (s *Source) suspect(sus sdk.Suspect) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.suspects) < 64 {
		s.suspects = append(s.suspects, sus)
	}
	for ch, ctx := range s.watchers {
		if ctx.Err() != nil {
			continue
		}
		select {
		case ch <- sus:
		default: // full: dropped, as the SuspectReporter contract allows
		}
	}
}
