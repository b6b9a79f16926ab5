package sdk

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SoftDeadline returns a context that ends a little before ctx's
// deadline: by a tenth of the time left, at most a second. Do the
// round's checks under it and return the votes when it ends, so that
// they reach vigil before the call's own deadline (an answer after it is
// lost):
//
//	func (s *source) Vote(ctx context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
//		cctx, cancel := sdk.SoftDeadline(ctx)
//		defer cancel()
//		// check the targets under cctx; those left when it ends abstain
//		// with sdk.ReasonOutOfTime
//	}
//
// Without a deadline on ctx it is context.WithCancel(ctx).
func SoftDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-SoftDeadlineMargin(time.Until(dl))))
}

// SoftDeadlineMargin is how much earlier than a deadline left seconds
// away [SoftDeadline] ends: a tenth of left, at most a second, and never
// less than zero.
func SoftDeadlineMargin(left time.Duration) time.Duration {
	return max(0, min(left/10, time.Second))
}

// NopLogger returns a Logger that discards everything: for a VoteSource
// built outside Serve (in tests, in a program that embeds it) whose
// constructor wants a Logger.
func NopLogger() Logger { return hclog.NewNullLogger() }
