package dnspup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/sdk"
)

// Name is the plugin's name.
const Name = "vigil-source-dnspup"

// Version is the plugin's version.
const Version = "0.1.0"

// VoterPrefix starts the voter id of every checkpoint's votes:
// "dnspup:<node id>".
const VoterPrefix = "dnspup:"

// AbstainVoter is the voter id of the source's Abstain votes, one per
// target it does not judge in a round (over budget, unsupported, out of
// time). No checkpoint looked at such a target, so the vote names the
// source rather than a checkpoint, and it cannot be mistaken for a
// checkpoint's vote "dnspup:<node id>".
const AbstainVoter = "dnspup"

// Options are the seams tests use; the zero value is the real thing.
type Options struct {
	// Getenv reads the credentials; os.Getenv when nil.
	Getenv func(string) string
	// Now is the clock for holds; time.Now when nil.
	Now func() time.Time
	// HTTPClient is the client's transport; a pooled client when nil.
	HTTPClient *http.Client
	// RetryWaitMax bounds in-call waits for Retry-After; 2s when 0.
	RetryWaitMax time.Duration
	// PollInterval is the wait between polls of a 202 Accepted probe
	// result (when dnspup gives no Retry-After); 500ms when 0.
	PollInterval time.Duration
}

// Source is the dnspup vote source. Build it with New.
type Source struct {
	log  hclog.Logger
	opts Options

	abstentions counters // targets without votes, by reason
	requests    counters // probe requests, by result ("ok" or an error class)
	quota       counters // probe requests that cost quota, "spent" or "uncertain"

	mu          sync.Mutex
	cfg         settings
	client      *customerapi.Client
	checkpoints []string
	stopped     bool      // 401 seen: no calls until Configure
	holdUntil   time.Time // quota or rate limit: no calls before
	holdReason  string
	round       uint64            // rounds voted, numbering the stamps in asked
	asked       map[string]uint64 // URL -> the round that last sent a request for it
	warned      map[string]bool   // unsupported targets already logged
}

var _ sdk.VoteSource = (*Source)(nil)

// New returns an unconfigured Source that logs to log.
func New(log hclog.Logger, opts Options) *Source {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Source{log: log, opts: opts}
}

// Abstentions returns how many targets the source did not judge, by
// reason: "over_budget", "unsupported" and "out_of_time" count the targets
// that got an Abstain vote with that reason, "pending" those that got one
// with plugin reason dnspup/pending; the others (such as "rate_limited",
// "stopped_unauthorized", "transport") count targets left without a vote
// because of the API (rate-limited targets get an Abstain vote with plugin
// reason dnspup/rate_limited when other targets of the round were judged).
func (s *Source) Abstentions() map[string]uint64 { return s.abstentions.snapshot() }

// Requests returns how many probe requests were sent, by result ("ok" or
// the error class, such as "unauthorized" or "transport").
func (s *Source) Requests() map[string]uint64 { return s.requests.snapshot() }

// QuotaSpend returns the probe requests (POSTs) counted against the dnspup
// quota since start: "spent" (accepted, 200 or 202) and "uncertain" (sent,
// no answer: dnspup may have charged it). The label result of
// vigil_plugin_dnspup_quota_requests_total (Metrics).
func (s *Source) QuotaSpend() map[string]uint64 { return s.quota.snapshot() }

// Info implements sdk.BasePlugin. The capabilities are the settings the
// plugin reads: it honours those the Customer API can carry and abstains
// with a reason on the others (unsupportedSettings).
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: Name, Version: Version, Capabilities: []string{
		sdk.CapabilityCABundle, sdk.CapabilityTLSServerName, sdk.CapabilityTLSInsecure,
		sdk.CapabilityHeaders, sdk.CapabilityFollowRedirects, sdk.CapabilityMaxBody, sdk.CapabilityAbstain,
	}}, nil
}

// ConfigSchema implements sdk.BasePlugin.
func (s *Source) ConfigSchema(context.Context) (sdk.Schema, error) {
	return schema, nil
}

// Configure implements sdk.BasePlugin: it checks the settings, that both
// credentials are in the environment, and the checkpoints against
// GET /v1/nodes. It clears any stop or hold.
func (s *Source) Configure(ctx context.Context, cfg sdk.Config) error {
	st, diags := parseSettings(cfg)
	key, secret := s.opts.Getenv(st.APIKeyEnv), s.opts.Getenv(st.APISecretEnv)
	for _, c := range []struct{ attr, env, val string }{
		{"api_key_env", st.APIKeyEnv, key}, {"api_secret_env", st.APISecretEnv, secret},
	} {
		if c.val == "" && envName(c.env) {
			diags = append(diags, sdk.AttributeError(c.attr,
				fmt.Sprintf("environment variable %s is not set", c.env),
				fmt.Sprintf("Set %s in vigil's environment and list it in this source's env = [...], so that vigil passes it to the plugin.", c.env)))
		}
	}
	if len(diags) > 0 {
		return diags
	}
	client, err := customerapi.New(customerapi.Config{
		BaseURL:      st.APIBase,
		Key:          customerapi.NewSecret(key),
		Secret:       customerapi.NewSecret(secret),
		HTTPClient:   s.opts.HTTPClient,
		RetryWaitMax: s.opts.RetryWaitMax,
		PollInterval: s.opts.PollInterval,
		UserAgent:    Name + "/" + Version,
	})
	if err != nil {
		return sdk.Diagnostics{sdk.AttributeError("api_base", "api_base is not usable", err.Error())}
	}
	lctx, cancel := context.WithTimeout(ctx, st.RequestTimeout)
	defer cancel()
	nodes, err := client.Nodes(lctx)
	if err != nil {
		return nodesError(st, err)
	}
	chosen, diags := chooseCheckpoints(st, nodes)
	if len(diags) > 0 {
		return diags
	}
	for _, n := range nodes {
		if !n.Online && slices.Contains(chosen, n.ID) {
			s.log.Warn("configured checkpoint is offline; it will cast no votes while offline", "checkpoint", n.ID)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg, s.client, s.checkpoints = st, client, chosen
	s.stopped, s.holdUntil, s.holdReason = false, time.Time{}, ""
	s.warned = nil
	s.log.Info("configured", "api_base", client.BaseURL(), "checkpoints", strings.Join(chosen, ","),
		"ip_version", st.IPVersion, "requests_per_round", st.RequestsPerRound, "batch_size", st.BatchSize,
		"concurrency", st.Concurrency)
	return nil
}

// nodesError turns a failed GET /v1/nodes into a diagnostic that says what
// to do.
func nodesError(st settings, err error) error {
	var ae *customerapi.Error
	if errors.As(err, &ae) && ae.Class() == customerapi.ClassUnauthorized {
		return sdk.Diagnostics{sdk.AttributeError("api_key_env", "dnspup rejected the API credentials",
			fmt.Sprintf("%v. Check the values of %s and %s.", err, st.APIKeyEnv, st.APISecretEnv))}
	}
	return sdk.Diagnostics{{Summary: "could not list the dnspup checkpoints (GET /v1/nodes)",
		Detail: fmt.Sprintf("%v. Check api_base and the network; vigil retries the plugin later.", err)}}
}

// chooseCheckpoints checks configured ids against the node list, or picks
// checkpoint_count online nodes, spreading over countries first.
func chooseCheckpoints(st settings, nodes []customerapi.Node) ([]string, sdk.Diagnostics) {
	known := make(map[string]bool, len(nodes))
	var all []string
	for _, n := range nodes {
		known[n.ID] = true
		all = append(all, n.ID)
	}
	if st.Checkpoints != nil {
		var diags sdk.Diagnostics
		for i, id := range st.Checkpoints {
			if !known[id] {
				diags = append(diags, sdk.ElementError("checkpoints", i, fmt.Sprintf("unknown dnspup checkpoint %q", id),
					"GET /v1/nodes lists: "+listSome(all, 40)+"."))
			}
		}
		return st.Checkpoints, diags
	}
	var chosen []string
	countries := map[string]bool{}
	taken := map[string]bool{}
	for pass := 0; pass < 2 && len(chosen) < st.CheckpointCount; pass++ {
		for _, n := range nodes {
			if len(chosen) == st.CheckpointCount {
				break
			}
			if !n.Online || taken[n.ID] || (pass == 0 && n.Country != "" && countries[n.Country]) {
				continue
			}
			chosen = append(chosen, n.ID)
			taken[n.ID] = true
			countries[n.Country] = true
		}
	}
	if len(chosen) < st.CheckpointCount {
		return nil, sdk.Diagnostics{sdk.AttributeError("checkpoint_count",
			fmt.Sprintf("checkpoint_count = %d but dnspup lists only %d online checkpoints", st.CheckpointCount, len(chosen)),
			"Lower checkpoint_count or list the checkpoints by id. Available: "+listSome(all, 40)+".")}
	}
	slices.Sort(chosen)
	return chosen, nil
}

func listSome(ids []string, n int) string {
	if len(ids) == 0 {
		return "(none)"
	}
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:n], ", ") + fmt.Sprintf(", … (%d more)", len(ids)-n)
}
