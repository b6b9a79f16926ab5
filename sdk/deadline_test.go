package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk"
)

func TestSoftDeadlineMargin(t *testing.T) {
	for _, tc := range []struct {
		left, want time.Duration
	}{
		{5 * time.Second, 500 * time.Millisecond},
		{30 * time.Second, time.Second},
		{100 * time.Millisecond, 10 * time.Millisecond},
		{0, 0},
		{-time.Second, 0},
	} {
		t.Run(tc.left.String(), func(t *testing.T) {
			if got := sdk.SoftDeadlineMargin(tc.left); got != tc.want {
				t.Errorf("SoftDeadlineMargin(%v) = %v, want %v", tc.left, got, tc.want)
			}
		})
	}
}

func TestSoftDeadline(t *testing.T) {
	t.Run("before the call's deadline", func(t *testing.T) {
		dl := time.Now().Add(time.Hour)
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		defer cancel()
		soft, cancel2 := sdk.SoftDeadline(ctx)
		defer cancel2()
		got, ok := soft.Deadline()
		if !ok || !got.Equal(dl.Add(-time.Second)) {
			t.Errorf("soft deadline %v (%v), want a second before %v", got, ok, dl)
		}
	})
	t.Run("no deadline", func(t *testing.T) {
		soft, cancel := sdk.SoftDeadline(context.Background())
		if _, ok := soft.Deadline(); ok {
			t.Error("a soft deadline out of none")
		}
		cancel()
		if soft.Err() == nil {
			t.Error("cancel did not end the context")
		}
	})
}

func TestNopLogger(t *testing.T) {
	log := sdk.NopLogger()
	log.Info("nothing", "k", 1) // must not panic
	log.Error("nothing")
}
