package customerapi

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryWaitBounds: without Retry-After, the wait before each retry is
// between half and all of a step that doubles from RetryWaitMin and is
// capped at RetryWaitMax; with one, it is Retry-After plus jitter.
func TestRetryWaitBounds(t *testing.T) {
	const lo, hi = 200 * time.Millisecond, 2 * time.Second
	steps := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, hi, hi, hi}
	const draws = 300
	for attempt, step := range steps {
		lowest, highest := step, time.Duration(0)
		for range draws {
			d := retryWait(lo, hi, attempt, nil)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: wait %v, want within [%v, %v]", attempt, d, step/2, step)
			}
			lowest, highest = min(lowest, d), max(highest, d)
		}
		if lowest > step*6/10 || highest < step*9/10 {
			t.Errorf("attempt %d: %d waits span [%v, %v], want most of [%v, %v]", attempt, draws, lowest, highest, step/2, step)
		}
	}
	if d := retryWait(lo, hi, 1000, nil); d < hi/2 || d > hi {
		t.Errorf("attempt 1000: wait %v, want within [%v, %v]", d, hi/2, hi)
	}
	resp := &http.Response{Header: http.Header{"Retry-After": []string{"1"}}}
	if d := retryWait(lo, hi, 0, resp); d < time.Second || d > 1350*time.Millisecond {
		t.Errorf("Retry-After 1: wait %v, want 1s plus at most 350ms of jitter", d)
	}
}
