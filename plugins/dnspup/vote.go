package dnspup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/api"
	"github.com/vigilcdn/vigil/sdk"
)

// Abstention reasons, the label of vigil_dnspup_abstentions_total.
const (
	abstainOverBudget = "over_budget"
	abstainBodyCheck  = "body_check_unsupported"
	abstainStopped    = "stopped_unauthorized"
	abstainHeld       = "holding_off"
	abstainTransport  = "transport"
	abstainUnreadable = "unreadable_answer"
)

// Vote implements sdk.VoteSource: it probes the ballot's targets through
// dnspup (batched, at most requests_per_round requests, at most concurrency
// at once) and returns one vote per checkpoint per target the checkpoint
// answered for. When the API refuses or fails, it abstains for the targets
// concerned; when no vote at all could be cast because of the API, it also
// returns an error so that vigil counts the failure.
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

	// Plan: one probe per distinct URL, in ballot order.
	var urls []string
	byURL := map[string][]int{}
	for i, t := range ballot.Targets {
		if t.Expect.BodyContains != "" {
			s.abstain(abstainBodyCheck, 1)
			s.log.Debug("no votes: dnspup cannot check the response body", "site", t.Site, "origin", t.Origin)
			continue
		}
		u := targetURL(t)
		if _, ok := byURL[u]; !ok {
			urls = append(urls, u)
		}
		byURL[u] = append(byURL[u], i)
	}
	batches := chunk(urls, cfg.BatchSize)
	if len(batches) > cfg.RequestsPerRound {
		over := 0
		for _, b := range batches[cfg.RequestsPerRound:] {
			for _, u := range b {
				over += len(byURL[u])
			}
		}
		batches = batches[:cfg.RequestsPerRound]
		s.abstain(abstainOverBudget, over)
		s.log.Warn("request budget reached: no votes for the remaining targets this round",
			"round", ballot.Round, "requests_per_round", cfg.RequestsPerRound, "batch_size", cfg.BatchSize,
			"targets_without_votes", over)
	}

	// Probe.
	var (
		mu       sync.Mutex
		results  = map[string]api.TargetResult{}
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, cfg.Concurrency)
	)
	count := func(b []string) (n int) {
		for _, u := range b {
			n += len(byURL[u])
		}
		return n
	}
	for _, b := range batches {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				s.abstain(abstainTransport, count(b))
				return
			}
			if why, label := s.blocked(); why != "" {
				s.abstain(label, count(b))
				return
			}
			res, err := s.probe(ctx, client, cfg, checkpoints, b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				label := s.handleError(err, cfg, ballot.Round, len(b))
				s.abstain(label, count(b))
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			s.requests.add("ok", 1)
			for _, r := range res {
				results[r.Target] = r
			}
		})
	}
	wg.Wait()

	// Votes.
	var votes []sdk.Vote
	for _, u := range urls {
		r, ok := results[u]
		if !ok {
			continue
		}
		for _, i := range byURL[u] {
			votes = append(votes, votesFor(ballot.Targets[i], r, checkpoints)...)
		}
	}
	if len(votes) == 0 && firstErr != nil {
		return nil, fmt.Errorf("dnspup: no votes this round: %w", firstErr)
	}
	return votes, nil
}

// probe sends one request for the URLs of batch: POST /v1/probes for one
// URL when batch_size is 1, else POST /v1/batch-probes.
func (s *Source) probe(ctx context.Context, client *api.Client, cfg settings, checkpoints []string, batch []string) ([]api.TargetResult, error) {
	rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	if cfg.BatchSize == 1 {
		r, err := client.Probe(rctx, api.ProbeRequest{
			Type: "http", Target: batch[0], IPVersion: cfg.IPVersion, Count: 1, Method: "GET", NodeIDs: checkpoints,
		})
		if err != nil {
			return nil, err
		}
		return []api.TargetResult{r}, nil
	}
	return client.BatchProbe(rctx, api.BatchProbeRequest{
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
	var ae *api.Error
	if !errors.As(err, &ae) {
		var te *api.TransportError
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
	case api.ClassUnauthorized:
		if !s.stopped {
			s.log.Error("ALERT: dnspup rejected the API credentials (401 unauthorized); the source stops calling dnspup and abstains until vigil reconfigures it",
				"alert", true, "api_key_env", cfg.APIKeyEnv, "api_secret_env", cfg.APISecretEnv, "code", ae.Code)
		}
		s.stopped = true
	case api.ClassQuota:
		wait := max(cfg.QuotaBackoff, ae.RetryAfter)
		s.hold(now, wait, ae.Code)
		s.log.Error("dnspup monthly quota exceeded; abstaining and not calling dnspup for a while",
			"code", ae.Code, "hold", wait, "until", s.holdUntil.Format(time.RFC3339))
	case api.ClassRateLimited:
		wait := ae.RetryAfter
		if wait <= 0 {
			wait = DefaultRateLimitWait
		}
		s.hold(now, api.WithJitter(wait), ae.Code)
		s.log.Warn("dnspup rate limit; abstaining until Retry-After has passed",
			"code", ae.Code, "retry_after", ae.RetryAfter, "until", s.holdUntil.Format(time.RFC3339Nano))
	case api.ClassUnavailable:
		s.log.Warn("dnspup service unavailable; abstaining this round", "round", round, "targets", targets, "code", ae.Code)
	case api.ClassInvalid:
		msg := "dnspup refused the request as invalid; not retried, no votes for its targets"
		if ae.Code == api.CodeInvalidNodes {
			msg = "dnspup refused the checkpoint ids (invalid_nodes); fix checkpoints and reload vigil"
		}
		s.log.Error(msg, "round", round, "targets", targets, "error", ae)
	case api.ClassForbidden, api.ClassEntitlement:
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
func votesFor(t sdk.Target, r api.TargetResult, checkpoints []string) []sdk.Vote {
	var votes []sdk.Vote
	for _, c := range r.Checkpoints {
		if !slices.Contains(checkpoints, c.NodeID) || c.Outcome == api.OutcomeNone {
			continue
		}
		v := sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: voterID(c.NodeID), Latency: c.Latency}
		switch c.Outcome {
		case api.OutcomeUp:
			v.Value, v.Reason, v.Detail = sdk.Up, sdk.ReasonOK, fmt.Sprintf("status %d", c.Status)
			if len(t.Expect.Statuses) > 0 && !slices.Contains(t.Expect.Statuses, c.Status) {
				v.Value, v.Reason = sdk.Down, sdk.ReasonUnexpectedStatus
				v.Detail = fmt.Sprintf("status %d not in the expected list", c.Status)
			} else if t.Expect.MaxLatency > 0 && c.Latency > t.Expect.MaxLatency {
				v.Value, v.Reason = sdk.Down, sdk.ReasonTooSlow
				v.Detail = fmt.Sprintf("status %d after %s, over %s", c.Status, c.Latency.Round(time.Millisecond), t.Expect.MaxLatency)
			}
		case api.OutcomeDown:
			v.Value, v.Reason = sdk.Down, reasonOf(c.Failure)
			if c.Failure == api.FailureStatus {
				v.Detail = fmt.Sprintf("status %d", c.Status)
			} else {
				v.Detail = c.Detail
			}
		}
		votes = append(votes, v)
	}
	return votes
}

func reasonOf(f api.Failure) sdk.Reason {
	switch f {
	case api.FailureStatus:
		return sdk.ReasonHTTP5xx
	case api.FailureTimeout:
		return sdk.ReasonTimeout
	case api.FailureConnection, api.FailureDNS:
		return sdk.ReasonConnectFailed
	case api.FailureTLS:
		return sdk.ReasonTLSFailed
	}
	return sdk.ReasonError
}

// voterID is "dnspup:" + the node id, with characters a voter id may not
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
