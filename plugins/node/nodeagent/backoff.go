package nodeagent

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// newBackOff is the wait policy of the agent's two reconnect loops (the
// gateway link and the publication follower): a step that doubles from lo
// up to hi, each wait drawn between half and all of its step ("equal
// jitter") so that nodes cut off together do not come back in one burst.
// Reset starts again from lo.
//
// The library draws each wait within ±RandomizationFactor of its current
// interval: an interval of three quarters of the step with a factor of 1/3
// spans exactly half to all of the step.
func newBackOff(lo, hi time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     lo * 3 / 4,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         hi * 3 / 4,
	}
}
