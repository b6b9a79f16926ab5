package dnspup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/sdk"
)

// Abstention labels, the label of vigil_dnspup_abstentions_total
// (Source.Abstentions), each counting targets. The first three are also the
// Reason of the Abstain votes the source returns (sdk.ReasonOverBudget,
// sdk.ReasonUnsupported, sdk.ReasonOutOfTime, by their names); the others
// count targets left without any vote because of the API.
const (
	abstainOverBudget  = "over_budget"
	abstainUnsupported = "unsupported"
	abstainOutOfTime   = "out_of_time"
	abstainStopped     = "stopped_unauthorized"
	abstainHeld        = "holding_off"
	abstainTransport   = "transport"
	abstainUnreadable  = "unreadable_answer"
	abstainPending     = "pending"
)

// Plugin reasons (sdk.Vote.PluginReason) of the source's abstentions that
// the standard reasons do not name.
const (
	// PluginReasonPending: dnspup accepted the request (202, quota spent)
	// but its result was not ready before the round's deadline.
	PluginReasonPending = "dnspup/pending"
	// PluginReasonRateLimited: dnspup answered 429 rate_limited or
	// capacity_limited, and its Retry-After did not fit in the round.
	PluginReasonRateLimited = "dnspup/rate_limited"
)

// Quota labels, the label result of
// vigil_plugin_dnspup_quota_requests_total (Source.Metrics,
// Source.QuotaSpend), each counting probe requests (POSTs).
const (
	// quotaSpent: dnspup accepted the request (200 or 202): it cost quota.
	quotaSpent = "spent"
	// quotaUncertain: the request was sent but no answer came (a broken
	// connection, the round's deadline): dnspup may have charged it.
	quotaUncertain = "uncertain"
)

// minRequestTime is the least time before the soft deadline for which a
// request is still sent: a request sure to be cut would cost quota for no
// vote.
const minRequestTime = 100 * time.Millisecond

// Vote implements sdk.VoteSource: it probes the ballot's targets through
// dnspup (batched, at most requests_per_round requests, at most concurrency
// at once, each fitted to the call's deadline) and returns one vote per
// checkpoint per target the checkpoint answered for. A target it does not
// judge gets one Abstain vote from voter AbstainVoter: ReasonUnsupported
// when dnspup cannot perform its health check as configured,
// ReasonOverBudget when the request budget is spent (different targets each
// round), ReasonOutOfTime when the call's time ran out before or while its
// request was answered. When the API refuses or fails, the targets of that
// request get no vote; when no Up or Down vote at all could be cast because
// of the API, Vote also returns an error so that vigil counts the failure.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	s.mu.Lock()
	cfg, client, checkpoints := s.cfg, s.client, s.checkpoints
	s.mu.Unlock()
	if client == nil {
		return nil, errors.New("dnspup: Vote called before a successful Configure")
	}
	if len(ballot.Targets) == 0 {
		return nil, nil
	}
	if why, label := s.blocked(); why != "" {
		s.abstain(label, len(ballot.Targets))
		s.log.Debug("abstaining on the whole ballot", "round", ballot.Round, "targets", len(ballot.Targets), "reason", why)
		return nil, errors.New("dnspup: " + why)
	}
	ctx, cancel, giveUp := softDeadline(ctx)
	defer cancel()

	// Plan: one probe per distinct URL of the targets dnspup can check.
	var (
		votes       []sdk.Vote
		urls        []string
		byURL       = map[string][]int{}
		unsupported int
	)
	for i := range ballot.Targets {
		t := &ballot.Targets[i]
		if names := unsupportedSettings(t); len(names) > 0 {
			votes = append(votes, abstention(t, sdk.ReasonUnsupported, "dnspup cannot honour health_check "+strings.Join(names, ", ")))
			s.warnUnsupported(t, names)
			unsupported++
			continue
		}
		u := targetURL(*t)
		if _, ok := byURL[u]; !ok {
			urls = append(urls, u)
		}
		byURL[u] = append(byURL[u], i)
	}
	s.abstain(abstainUnsupported, unsupported)
	if unsupported > 0 {
		s.log.Debug("abstained on targets whose health check dnspup cannot perform", "round", ballot.Round, "unsupported", unsupported)
	}
	urls, round := s.order(urls)
	if capacity := cfg.RequestsPerRound * cfg.BatchSize; len(urls) > capacity {
		over := 0
		detail := fmt.Sprintf("request budget spent this round (requests_per_round = %d)", cfg.RequestsPerRound)
		for _, u := range urls[capacity:] {
			for _, i := range byURL[u] {
				votes = append(votes, abstention(&ballot.Targets[i], sdk.ReasonOverBudget, detail))
				over++
			}
		}
		urls = urls[:capacity]
		s.abstain(abstainOverBudget, over)
		s.log.Warn("request budget reached: abstaining (over_budget) on the targets beyond it this round; the next rounds ask for them first. To judge every target every round, raise requests_per_round or batch_size",
			"round", ballot.Round, "requests_per_round", cfg.RequestsPerRound, "batch_size", cfg.BatchSize,
			"targets", len(ballot.Targets), "over_budget", over)
	}

	// Probe.
	batches := chunk(urls, cfg.BatchSize)
	out := s.send(ctx, giveUp, client, cfg, checkpoints, batches, ballot.Round)
	s.stamp(round, batches, out)

	// Votes.
	var (
		firstErr                    error
		notSent, cutShort, pendingN int
		pendingIDs                  []string
		judged                      bool
	)
	for k, b := range batches {
		o := out[k]
		switch {
		case o.label != "": // failed, or held back after a sibling's 401 or rate limit
			s.abstain(o.label, count(b, byURL))
			if firstErr == nil && o.err != nil {
				firstErr = o.err
			}
			if o.label == customerapi.ClassRateLimited.String() {
				for _, u := range b {
					for _, i := range byURL[u] {
						v := abstention(&ballot.Targets[i], sdk.ReasonOutOfTime, "dnspup rate-limited the request and its Retry-After did not fit in the round")
						v.PluginReason = PluginReasonRateLimited
						votes = append(votes, v)
					}
				}
			}
		case o.pending != nil:
			for _, u := range b {
				for _, i := range byURL[u] {
					detail := "dnspup accepted the request as " + o.pending.ID + " but its result was not ready before the round's deadline"
					if o.pending.ID == "" {
						detail = "dnspup accepted the request (202) but gave no id to poll its result by"
					}
					v := abstention(&ballot.Targets[i], sdk.ReasonOutOfTime, detail)
					v.PluginReason = PluginReasonPending
					votes = append(votes, v)
					pendingN++
				}
			}
			pendingIDs = append(pendingIDs, o.pending.ID)
		case !o.sent:
			for _, u := range b {
				for _, i := range byURL[u] {
					votes = append(votes, abstention(&ballot.Targets[i], sdk.ReasonOutOfTime, "the round's time ran out before dnspup could be asked"))
					notSent++
				}
			}
		case o.late || !o.answered:
			for _, u := range b {
				for _, i := range byURL[u] {
					votes = append(votes, abstention(&ballot.Targets[i], sdk.ReasonOutOfTime, "the round's deadline came while dnspup was probing"))
					cutShort++
				}
			}
			if !o.answered { // given up on: its goroutine counts nothing
				s.requests.add(abstainOutOfTime, 1)
			}
		default:
			results := make(map[string]customerapi.TargetResult, len(o.res))
			for _, r := range o.res {
				results[r.Target] = r
			}
			for _, u := range b {
				r, ok := results[u]
				if !ok {
					continue
				}
				for _, i := range byURL[u] {
					vs := votesFor(ballot.Targets[i], r, checkpoints)
					judged = judged || len(vs) > 0
					votes = append(votes, vs...)
				}
			}
		}
	}
	if n := notSent + cutShort; n > 0 {
		s.abstain(abstainOutOfTime, n)
		s.log.Warn("the round's time ran out: abstaining (out_of_time) on targets dnspup could not judge in time; the next rounds ask for them first. Raise the source's timeout, raise concurrency or lower requests_per_round",
			"round", ballot.Round, "out_of_time", n, "not_sent", notSent, "cut_in_flight", cutShort,
			"request_timeout", cfg.RequestTimeout, "concurrency", cfg.Concurrency)
	}
	if pendingN > 0 {
		s.abstain(abstainPending, pendingN)
		s.log.Warn("dnspup answered 202 Accepted and its results were not ready before the round's deadline: abstaining (dnspup/pending); the quota is spent. Raise the source's timeout or lower batch_size",
			"round", ballot.Round, "pending", pendingN, "ids", pendingIDs, "quota_spent_total", s.quota.snapshot()[quotaSpent])
	}
	s.log.Debug("dnspup quota spend", "round", ballot.Round, "quota_spent_total", s.quota.snapshot()[quotaSpent], "quota_uncertain_total", s.quota.snapshot()[quotaUncertain])
	if !judged && firstErr != nil {
		return nil, fmt.Errorf("dnspup: no votes this round: %w", firstErr)
	}
	return votes, nil
}

// outcome is what became of one batch's request.
type outcome struct {
	sent     bool                       // the request was started
	answered bool                       // it returned before Vote stopped waiting
	late     bool                       // it was cut by the soft deadline
	res      []customerapi.TargetResult // its results, when it succeeded
	label    string                     // the abstention label when it failed or was held back
	err      error                      // the API failure, when it failed
	pending  *customerapi.PendingError  // accepted (202) but not ready in time
}

// send sends the batches' requests, at most concurrency at once, in order.
// Each request's timeout is the smaller of request_timeout and the time
// left before the soft deadline (ctx's); a request with less than
// minRequestTime left is not sent, nor any after it. send returns when
// every request has returned, or at giveUp: by then the soft deadline has
// cancelled every request still in flight, and one that has not returned
// all the same (a stuck transport) must not hold Vote past its deadline.
// It is then reported as not answered, and what it returns later is
// dropped.
func (s *Source) send(ctx context.Context, giveUp time.Time, client *customerapi.Client, cfg settings, checkpoints []string, batches [][]string, round uint64) []outcome {
	out := make([]outcome, len(batches))
	if len(batches) == 0 {
		return out
	}
	soft, hasSoft := ctx.Deadline()
	var (
		mu     sync.Mutex // guards out and closed
		closed bool       // send has returned
	)
	// one sends the request of batch k, unless it is too late; it reports
	// false when no later batch may be sent either.
	one := func(k int) bool {
		if ctx.Err() != nil {
			return false
		}
		timeout, clipped := cfg.RequestTimeout, false
		if hasSoft {
			left := time.Until(soft)
			if left < minRequestTime {
				return false // this batch and every later one: out of time
			}
			if left < timeout {
				timeout, clipped = left, true
			}
		}
		mu.Lock()
		if closed {
			mu.Unlock()
			return false
		}
		if why, label := s.blocked(); why != "" { // a sibling request hit a 401 or a rate limit
			out[k] = outcome{label: label}
			mu.Unlock()
			return true
		}
		out[k].sent = true
		mu.Unlock()

		res, err := s.probe(ctx, client, cfg, checkpoints, batches[k], timeout)
		var (
			ae *customerapi.Error
			pe *customerapi.PendingError
			te *customerapi.TransportError
		)
		pending := errors.As(err, &pe)
		late := err != nil && !pending && !errors.As(err, &ae) &&
			(ctx.Err() != nil || (clipped && !time.Now().Before(soft)))
		switch {
		case err == nil || pending:
			s.quota.add(quotaSpent, 1)
		case late, errors.As(err, &te) && te.Sent:
			s.quota.add(quotaUncertain, 1)
		}

		mu.Lock()
		defer mu.Unlock()
		if closed {
			return false
		}
		o := &out[k]
		o.answered = true
		switch {
		case err == nil:
			o.res = res
			s.requests.add("ok", 1)
		case pending:
			o.pending = pe
			s.requests.add(abstainPending, 1)
		case late: // for lack of time, not an API failure: never a Down, nor an error
			o.late = true
			s.requests.add(abstainOutOfTime, 1)
		default:
			o.err = err
			o.label = s.handleError(err, cfg, round, len(batches[k]))
		}
		return true
	}
	// At most concurrency requests in flight, started in order. A plain
	// Group (no WithContext): a failed request cancels no other; the
	// requests stop once one finds it too late. The batches are handed
	// out from a goroutine so that send can stop waiting at giveUp even
	// while every slot is held by a request that does not return.
	done := make(chan struct{})
	go func() {
		defer close(done)
		var g errgroup.Group
		g.SetLimit(max(1, cfg.Concurrency)) // 1 to 64 by parseSettings
		var stopped atomic.Bool
		for k := range batches {
			if stopped.Load() {
				break
			}
			g.Go(func() error {
				if !stopped.Load() && !one(k) {
					stopped.Store(true)
				}
				return nil
			})
		}
		_ = g.Wait() // every func returns nil
	}()
	var stop <-chan time.Time
	if !giveUp.IsZero() {
		t := time.NewTimer(time.Until(giveUp))
		defer t.Stop()
		stop = t.C
	}
	select {
	case <-done:
	case <-stop:
		s.log.Warn("dnspup requests did not return after the round's soft deadline cancelled them; answering without them", "round", round)
	}
	mu.Lock()
	defer mu.Unlock()
	closed = true
	return slices.Clone(out)
}

func count(batch []string, byURL map[string][]int) (n int) {
	for _, u := range batch {
		n += len(byURL[u])
	}
	return n
}

// order returns urls in the order this round asks for them: least recently
// asked first (never asked before anything), ties in ballot order; and the
// round's number for stamp.
//
// What the budget or the deadline cuts is the tail of this order, so it
// rotates: a URL cut in one round was asked less recently than every URL
// asked in that round, so it comes before them in the next. With a steady
// ballot of N URLs of which C fit in a round, this is plain round-robin and
// every URL is asked at least once every ceil(N/C) rounds. This beats a
// moving offset, which skips or repeats URLs when the ballot changes
// between rounds (origins settled by an earlier source are not passed on),
// and a per-round shuffle, which bounds the wait of a URL only in
// probability.
func (s *Source) order(urls []string) ([]string, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.round++
	ordered := slices.Clone(urls)
	slices.SortStableFunc(ordered, func(a, b string) int { return cmp.Compare(s.asked[a], s.asked[b]) })
	return ordered, s.round
}

// forgetAfter is how many rounds the time a URL was last asked for is
// kept: older, it sorts first anyway.
const forgetAfter = 1024

// stamp records that round asked for the URLs of the batches whose request
// was sent (answered or not: each cost budget). URLs not sent keep their
// older stamp and so come first next round.
func (s *Source) stamp(round uint64, batches [][]string, out []outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked == nil {
		s.asked = map[string]uint64{}
	}
	for k, b := range batches {
		if out[k].sent {
			for _, u := range b {
				s.asked[u] = round
			}
		}
	}
	if round%64 == 0 {
		maps.DeleteFunc(s.asked, func(_ string, r uint64) bool { return round-r > forgetAfter })
	}
}

// unsupportedSettings names the health_check settings of t that dnspup
// cannot honour, so that its checkpoints would judge something other than
// what the operator asked for. The API takes a URL and nothing else, and
// its checkpoints make one GET with public trust roots:
//
//   - expected_body: the API returns no response body;
//   - headers: no request header can be sent (an origin that needs one,
//     such as a token, would answer 401 or 403, which counts as up);
//   - ca_file (https): the checkpoints trust the public roots only, so an
//     origin with a private CA would fail TLS and be voted down;
//   - tls_server_name (https), when it is not the address's host: the
//     checkpoints send the URL's host as SNI and verify against it;
//   - insecure_skip_tls_verify (https): the checkpoints always verify, so
//     the certificate the operator chose to accept would be voted down;
//   - follow_redirects: the checkpoints do not follow redirects, so a
//     redirect to a failing page, or off the host, would count as up.
//
// The site's Host header, the User-Agent and the probe timeout cannot be
// sent either, but every target has them: they are the documented
// limits of what dnspup judges (see the package doc), not reasons to
// abstain. max_body only bounds a body check, which never runs here.
func unsupportedSettings(t *sdk.Target) []string {
	var names []string
	if t.Expect.BodyContains != "" {
		names = append(names, "expected_body")
	}
	if len(t.Headers) > 0 {
		names = append(names, "headers")
	}
	if u, err := url.Parse(t.Address); err == nil && strings.EqualFold(u.Scheme, "https") {
		if t.TLS.CA != "" {
			names = append(names, "ca_file")
		}
		if t.TLS.ServerName != "" && !strings.EqualFold(t.TLS.ServerName, u.Hostname()) {
			names = append(names, "tls_server_name")
		}
		if t.TLS.InsecureSkipVerify {
			names = append(names, "insecure_skip_tls_verify")
		}
	}
	if t.FollowRedirects {
		names = append(names, "follow_redirects")
	}
	return names
}

// warnUnsupported logs, once per target and set of settings until the
// next Configure, that the target gets no dnspup vote and why.
func (s *Source) warnUnsupported(t *sdk.Target, names []string) {
	key := t.Site + "\x00" + t.Origin + "\x00" + strings.Join(names, ",")
	s.mu.Lock()
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	seen := s.warned[key]
	s.warned[key] = true
	s.mu.Unlock()
	if !seen {
		s.log.Warn("dnspup cannot perform this origin's health check as configured, so it abstains on the origin (unsupported) every round and other sources judge it. To get dnspup votes, remove these settings from the site's health_check",
			"site", t.Site, "origin", t.Origin, "settings", strings.Join(names, ", "))
	}
}

// abstention is the Abstain vote of the source on t.
func abstention(t *sdk.Target, reason sdk.Reason, detail string) sdk.Vote {
	return sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: AbstainVoter, Value: sdk.Abstain, Reason: reason, Detail: detail}
}

// softDeadline ends the requests a little before the call's deadline (a
// tenth of the time left, at most a second: sdk.SoftDeadline's margin) so that
// the votes cast get back to vigil in time. giveUp, halfway from the soft
// deadline to the call's, is when Vote stops waiting for requests that the
// soft deadline cancelled; it is zero when ctx has no deadline.
func softDeadline(ctx context.Context) (context.Context, context.CancelFunc, time.Time) {
	dl, ok := ctx.Deadline()
	if !ok {
		c, cancel := context.WithCancel(ctx)
		return c, cancel, time.Time{}
	}
	margin := sdk.SoftDeadlineMargin(time.Until(dl))
	c, cancel := context.WithDeadline(ctx, dl.Add(-margin))
	return c, cancel, dl.Add(-margin / 2)
}

// probe sends one request for the URLs of batch, within timeout: POST
// /v1/probes for one URL when batch_size is 1, else POST /v1/batch-probes.
func (s *Source) probe(ctx context.Context, client *customerapi.Client, cfg settings, checkpoints []string, batch []string, timeout time.Duration) ([]customerapi.TargetResult, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if cfg.BatchSize == 1 {
		r, err := client.Probe(rctx, customerapi.ProbeRequest{
			Type: "http", Target: batch[0], IPVersion: cfg.IPVersion, Count: 1, Method: "GET", NodeIDs: checkpoints,
		})
		if err != nil {
			return nil, err
		}
		return []customerapi.TargetResult{r}, nil
	}
	return client.BatchProbe(rctx, customerapi.BatchProbeRequest{
		Type: "http", Targets: batch, IPVersion: cfg.IPVersion, Count: 1, Method: "GET", NodeIDs: checkpoints,
	})
}

// blocked reports why no request may be sent now ("" when they may), and
// the abstention label.
func (s *Source) blocked() (why, label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return "stopped after dnspup rejected the API credentials (401 unauthorized); fix " +
			s.cfg.APIKeyEnv + "/" + s.cfg.APISecretEnv + " and reload vigil", abstainStopped
	}
	if now := s.opts.Now(); now.Before(s.holdUntil) {
		return fmt.Sprintf("holding off dnspup calls for %s more after %s", s.holdUntil.Sub(now).Round(time.Second), s.holdReason), abstainHeld
	}
	return "", ""
}

// handleError logs a failed request, sets the stop or hold the error table
// asks for, and returns the abstention label.
func (s *Source) handleError(err error, cfg settings, round uint64, targets int) string {
	var ae *customerapi.Error
	if !errors.As(err, &ae) {
		var te *customerapi.TransportError
		label := abstainUnreadable
		if errors.As(err, &te) {
			label = abstainTransport
			if te.Sent {
				s.log.Warn("dnspup request failed after it was sent; not retried, since dnspup may have accepted it and charged quota",
					"round", round, "targets", targets, "error", err)
			} else {
				s.log.Warn("dnspup request could not be sent", "round", round, "targets", targets, "error", err)
			}
		} else {
			s.log.Warn("dnspup answer could not be read; no votes for its targets", "round", round, "targets", targets, "error", err)
		}
		s.requests.add(label, 1)
		return label
	}
	cls := ae.Class()
	s.requests.add(cls.String(), 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	switch cls {
	case customerapi.ClassUnauthorized:
		if !s.stopped {
			s.log.Error("ALERT: dnspup rejected the API credentials (401 unauthorized); the source stops calling dnspup and abstains until vigil reconfigures it",
				"alert", true, "api_key_env", cfg.APIKeyEnv, "api_secret_env", cfg.APISecretEnv, "code", ae.Code)
		}
		s.stopped = true
	case customerapi.ClassQuota:
		wait := max(cfg.QuotaBackoff, ae.RetryAfter)
		s.hold(now, wait, ae.Code)
		s.log.Error("dnspup monthly quota exceeded; abstaining and not calling dnspup for a while",
			"code", ae.Code, "hold", wait, "until", s.holdUntil.Format(time.RFC3339))
	case customerapi.ClassRateLimited:
		wait := ae.RetryAfter
		if wait <= 0 {
			wait = DefaultRateLimitWait
		}
		s.hold(now, customerapi.WithJitter(wait), ae.Code)
		s.log.Warn("dnspup rate limit; abstaining until Retry-After has passed",
			"code", ae.Code, "retry_after", ae.RetryAfter, "until", s.holdUntil.Format(time.RFC3339Nano))
	case customerapi.ClassUnavailable:
		s.log.Warn("dnspup service unavailable; abstaining this round", "round", round, "targets", targets, "code", ae.Code)
	case customerapi.ClassInvalid:
		msg := "dnspup refused the request as invalid; not retried, no votes for its targets"
		if ae.Code == customerapi.CodeInvalidNodes {
			msg = "dnspup refused the checkpoint ids (invalid_nodes); fix checkpoints and reload vigil"
		}
		s.log.Error(msg, "round", round, "targets", targets, "error", ae)
	case customerapi.ClassForbidden, customerapi.ClassEntitlement:
		s.log.Error("dnspup does not allow this request for the account; no votes for its targets",
			"round", round, "targets", targets, "error", ae)
	default:
		s.log.Warn("dnspup request failed; no votes for its targets", "round", round, "targets", targets, "error", ae)
	}
	return cls.String()
}

// hold stops calls until now+d, keeping the longer of two holds.
func (s *Source) hold(now time.Time, d time.Duration, reason string) {
	if until := now.Add(d); until.After(s.holdUntil) {
		s.holdUntil, s.holdReason = until, reason
	}
}

func (s *Source) abstain(reason string, targets int) {
	if targets > 0 {
		s.abstentions.add(reason, targets)
	}
}

// targetURL is what the checkpoints fetch: the origin's address plus the
// health check path. dnspup takes a URL only, so the site's Host header
// cannot be sent (see the package doc).
func targetURL(t sdk.Target) string {
	p := t.Path
	if p == "" {
		p = "/"
	} else if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return strings.TrimSuffix(t.Address, "/") + p
}

func chunk(xs []string, n int) [][]string {
	var out [][]string
	for len(xs) > 0 {
		k := min(n, len(xs))
		out = append(out, xs[:k:k])
		xs = xs[k:]
	}
	return out
}

// votesFor turns a target's checkpoint results into votes: only the
// configured checkpoints vote, once each.
func votesFor(t sdk.Target, r customerapi.TargetResult, checkpoints []string) []sdk.Vote {
	var votes []sdk.Vote
	for _, c := range r.Checkpoints {
		if !slices.Contains(checkpoints, c.NodeID) || c.Outcome == customerapi.OutcomeNone {
			continue
		}
		v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voterID(c.NodeID), Latency: c.Latency}
		switch c.Outcome {
		case customerapi.OutcomeUp:
			v.Value, v.Reason, v.Detail = sdk.Up, sdk.ReasonOK, fmt.Sprintf("status %d", c.Status)
			if len(t.Expect.Statuses) > 0 && !slices.Contains(t.Expect.Statuses, c.Status) {
				v.Value, v.Reason = sdk.Down, sdk.ReasonUnexpectedStatus
				v.Detail = fmt.Sprintf("status %d not in the expected list", c.Status)
			} else if t.Expect.MaxLatency > 0 && c.Latency > t.Expect.MaxLatency {
				v.Value, v.Reason = sdk.Down, sdk.ReasonTooSlow
				v.Detail = fmt.Sprintf("status %d after %s, over %s", c.Status, c.Latency.Round(time.Millisecond), t.Expect.MaxLatency)
			}
		case customerapi.OutcomeDown:
			v.Value, v.Reason = sdk.Down, reasonOf(c.Failure)
			if c.Failure == customerapi.FailureStatus {
				v.Detail = fmt.Sprintf("status %d", c.Status)
			} else {
				v.Detail = c.Detail
			}
		}
		votes = append(votes, v)
	}
	return votes
}

func reasonOf(f customerapi.Failure) sdk.Reason {
	switch f {
	case customerapi.FailureStatus:
		return sdk.ReasonHTTP5xx
	case customerapi.FailureTimeout:
		return sdk.ReasonTimeout
	case customerapi.FailureConnection, customerapi.FailureDNS:
		return sdk.ReasonConnectFailed
	case customerapi.FailureTLS:
		return sdk.ReasonTLSFailed
	}
	return sdk.ReasonError
}

// voterID is VoterPrefix + the node id, with characters a voter id may not
// hold replaced by "_".
func voterID(node string) string {
	b := []byte(VoterPrefix + node)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '-', c == '@', c == '/':
		default:
			b[i] = '_'
		}
	}
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}
