// Command testsource is the plugin the pluginhost tests run. It hangs
// before its handshake while the file named by VIGIL_TEST_HANG_START
// exists. Its behavior for a ballot is chosen by the first target's site
// name:
//
//	hang     block forever, ignoring the deadline (after writing ready_file)
//	block    write ready_file, then block until the call is cancelled
//	exit     exit the process in the middle of the call
//	error    return an error
//	exhausted  answer gRPC status RESOURCE_EXHAUSTED "quota exhausted"
//	unavailable  answer gRPC status UNAVAILABLE (a crash: vigil restarts it)
//	garbage  answer with invalid votes (and one valid one)
//	env      vote Up with the environment's names in Detail
//	pluginreason  one Down with a plugin reason, one with a malformed one
//	settings  one Up vote per target whose detail says what the target
//	          carried: "ca=NAME pem=BYTES sni=NAME headers=N"
//	pid      one Up vote per target whose detail is "pid=" and the process id
//	output   print "to stdout" on stdout, "to stderr" on stderr and "by the
//	         log package" through Go's log package, then one Up vote per target
//	bigdetail  one Up vote per target with a detail of 1 MiB
//	logflood  log 20,000 lines at INFO, then one Up vote per target
//	metrics  one Up vote per target; from then on its answers carry the
//	         metrics testsource_metric_votes_total (the "metrics" ballots
//	         so far) and "Bad Name", which vigil drops
//
// Its Info declares the capabilities listed, comma-separated, in
// VIGIL_TEST_CAPS (none when it is unset).
//
// With VIGIL_TEST_SCHEMA=duplicate its schema declares "voter" twice.
// With VIGIL_TEST_NO_SUSPECTS set it does not report suspects, as a plugin
// built with an SDK older than sdk.SuspectReporter.
//
// It reports suspects (sdk.SuspectReporter): each target of a site whose
// name starts with "suspect" is one, to the watchers of the moment and to
// every later one; a ballot whose first site is "flood" reports 100
// suspects of site "flood", then one of a site never in a ballot and one
// of a name of 300 bytes.
//
//	anything else: one Up vote per target from the configured voter
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilcdn/vigil/sdk"
)

type source struct {
	log       sdk.Logger
	voter     string
	readyFile string

	mu          sync.Mutex
	metricVotes int // ballots of site "metrics"
	suspects    []sdk.Suspect
	watchers    map[chan sdk.Suspect]context.Context
}

func (s *source) Suspects(ctx context.Context) <-chan sdk.Suspect {
	ch := make(chan sdk.Suspect, 256)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sus := range s.suspects {
		ch <- sus
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

func (s *source) suspect(sus ...sdk.Suspect) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.suspects) < 128 {
		s.suspects = append(s.suspects, sus...)
	}
	for ch, ctx := range s.watchers {
		for _, x := range sus {
			select {
			case ch <- x:
			case <-ctx.Done():
			}
		}
	}
}

func (s *source) Info(context.Context) (sdk.Info, error) {
	var caps []string
	if c := os.Getenv("VIGIL_TEST_CAPS"); c != "" {
		caps = strings.Split(c, ",")
	}
	return sdk.Info{Name: "testsource", Version: "1.2.3", Capabilities: caps}, nil
}

func (s *source) ConfigSchema(context.Context) (sdk.Schema, error) {
	if os.Getenv("VIGIL_TEST_SCHEMA") == "duplicate" {
		return sdk.Schema{Attributes: []sdk.Attribute{{Name: "voter", Type: sdk.TypeString}, {Name: "voter", Type: sdk.TypeNumber}}}, nil
	}
	return sdk.Schema{Attributes: []sdk.Attribute{
		{Name: "voter", Type: sdk.TypeString, Required: true, Description: "voter id of the votes"},
		{Name: "ready_file", Type: sdk.TypeString},
		{Name: "tags", Type: sdk.TypeStringList},
		{Name: "count", Type: sdk.TypeNumber},
		{Name: "interval", Type: sdk.TypeDuration},
		{Name: "enabled", Type: sdk.TypeBool},
	}}, nil
}

func (s *source) Configure(_ context.Context, cfg sdk.Config) error {
	var diags sdk.Diagnostics
	s.voter, _ = cfg.String("voter")
	if !sdk.ValidVoter(s.voter) {
		diags = append(diags, sdk.AttributeError("voter", "Invalid voter id", "use letters, digits and ._:-@/ only"))
	}
	s.readyFile, _ = cfg.String("ready_file")
	tags, _ := cfg.Strings("tags")
	for i, t := range tags {
		if t == "bad" {
			diags = append(diags, sdk.ElementError("tags", i, "Bad tag", `"bad" is not a tag`))
		}
	}
	if n, ok := cfg.Number("count"); ok && n > 10 {
		diags = append(diags, sdk.AttributeError("count", "Count too high", "count must be at most 10"))
	}
	if _, ok := cfg.Duration("interval"); ok {
		if on, set := cfg.Bool("enabled"); set && !on {
			diags = append(diags, sdk.Diagnostic{Summary: "interval needs enabled", Detail: "remove interval or set enabled = true"})
		}
	}
	return diags.Err()
}

func (s *source) ready() {
	if s.readyFile != "" {
		_ = os.WriteFile(s.readyFile, []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
}

func (s *source) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	mode := ""
	if len(b.Targets) > 0 {
		mode = b.Targets[0].Site
	}
	s.log.Debug("vote", "mode", mode, "targets", len(b.Targets))
	for _, t := range b.Targets {
		if strings.HasPrefix(t.Site, "suspect") {
			s.suspect(sdk.Suspect{Site: t.Site, Origin: t.Origin, Detail: "real traffic failing"})
		}
	}
	switch mode {
	case "metrics":
		s.mu.Lock()
		s.metricVotes++
		s.mu.Unlock()
	case "flood":
		flood := make([]sdk.Suspect, 0, 102)
		for range 100 {
			flood = append(flood, sdk.Suspect{Site: "flood"})
		}
		flood = append(flood, sdk.Suspect{Site: "never-in-a-ballot"}, sdk.Suspect{Site: strings.Repeat("x", 300)})
		s.suspect(flood...)
	case "hang":
		s.ready()
		select {}
	case "block":
		s.ready()
		<-ctx.Done()
		return nil, ctx.Err()
	case "exit":
		os.Exit(3)
	case "error":
		return nil, errors.New("upstream API said no")
	case "exhausted":
		return nil, status.Error(codes.ResourceExhausted, "quota exhausted")
	case "unavailable":
		return nil, status.Error(codes.Unavailable, "cannot serve: lost my backend")
	case "garbage":
		t := b.Targets[0]
		return []sdk.Vote{
			{Site: t.Site, Origin: "not-asked", Voter: s.voter, Value: sdk.Up},
			{Site: "other", Origin: t.Origin, Voter: s.voter, Value: sdk.Up},
			{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: 0},
			{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: 7},
			{Site: t.Site, Origin: t.Origin, Voter: "", Value: sdk.Down},
			{Site: t.Site, Origin: t.Origin, Voter: "has space", Value: sdk.Down},
			{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Down, Reason: 99},
			{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Up}, // duplicate voter
		}, nil
	case "pluginreason":
		t := b.Targets[0]
		return []sdk.Vote{
			{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Down, Reason: sdk.ReasonTLSFailed, PluginReason: "testsource/cert_expiring", Detail: "expires in 3 days"},
			{Site: t.Site, Origin: t.Origin, Voter: s.voter + "2", Value: sdk.Down, Reason: sdk.ReasonTLSFailed, PluginReason: "Not Namespaced"},
		}, nil
	case "settings":
		votes := make([]sdk.Vote, len(b.Targets))
		for i, t := range b.Targets {
			votes[i] = sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Up, Reason: sdk.ReasonOK,
				Detail: fmt.Sprintf("ca=%s pem=%d sni=%s headers=%d", t.TLS.CA, len(b.CAs[t.TLS.CA]), t.TLS.ServerName, len(t.Headers))}
		}
		return votes, nil
	case "output":
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		log.Print("by the log package")
	case "logflood":
		for i := range 20000 {
			s.log.Info("flooding the log", "i", i)
		}
	case "bigdetail":
		votes := make([]sdk.Vote, len(b.Targets))
		for i, t := range b.Targets {
			votes[i] = sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Up, Reason: sdk.ReasonOK, Detail: strings.Repeat("é", 1<<19)}
		}
		return votes, nil
	case "pid":
		votes := make([]sdk.Vote, len(b.Targets))
		for i, t := range b.Targets {
			votes[i] = sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Up, Reason: sdk.ReasonOK, Detail: fmt.Sprintf("pid=%d", os.Getpid())}
		}
		return votes, nil
	case "env":
		// Names only (values may be multi-line certificates), with the
		// values of VIGIL_ variables.
		var env []string
		for _, kv := range os.Environ() {
			name, value, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(name, "VIGIL_") {
				name += "=" + value
			}
			env = append(env, name)
		}
		sort.Strings(env)
		return []sdk.Vote{{Site: b.Targets[0].Site, Origin: b.Targets[0].Origin, Voter: s.voter, Value: sdk.Up, Detail: strings.Join(env, "\n")}}, nil
	}
	votes := make([]sdk.Vote, len(b.Targets))
	for i, t := range b.Targets {
		votes[i] = sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Up, Reason: sdk.ReasonOK, Latency: 1}
	}
	return votes, nil
}

func main() {
	// A start that hangs before the handshake: while the file named by
	// VIGIL_TEST_HANG_START exists, the process never says it is ready.
	if f := os.Getenv("VIGIL_TEST_HANG_START"); f != "" {
		if _, err := os.Stat(f); err == nil {
			select {}
		}
	}
	if os.Getenv("VIGIL_TEST_NO_SUSPECTS") != "" {
		sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return noSuspects{&source{log: log}} })
		return
	}
	sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return &source{log: log} })
}

// noSuspects hides the source's Suspects method.
type noSuspects struct{ sdk.VoteSource }

// Metrics implements sdk.MetricsReporter: nothing until a "metrics"
// ballot, then a counter of them and a series vigil drops.
func (s *source) Metrics() []sdk.Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metricVotes == 0 {
		return nil
	}
	return []sdk.Metric{
		{Name: "testsource_metric_votes_total", Kind: sdk.MetricCounter, Value: float64(s.metricVotes), Help: "Ballots of site metrics."},
		{Name: "Bad Name", Kind: sdk.MetricGauge, Value: 1},
	}
}
