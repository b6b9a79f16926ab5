package sdktest

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

// Suspects opens src's suspect stream as vigil does (src comes from
// [InProcess] or [Launch]) and returns the suspects the plugin reports, in
// order. The channel is closed when the stream ends. The test fails when
// the plugin does not report suspects (see [sdk.SuspectReporter]) or the
// stream breaks; a plugin that closes its channel just ends the stream.
// The stream is closed at the end of the test.
func Suspects(t testing.TB, src sdk.VoteSource) <-chan sdk.Suspect {
	t.Helper()
	w, ok := src.(host.SuspectWatcher)
	if !ok {
		t.Fatalf("sdktest: %T is not a host-side client: get it from sdktest.InProcess or sdktest.Launch", src)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan sdk.Suspect, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		err := w.WatchSuspects(ctx, func(s sdk.Suspect) {
			select {
			case out <- s:
			case <-ctx.Done():
			}
		})
		switch {
		case ctx.Err() != nil, errors.Is(err, io.EOF):
		case errors.Is(err, sdk.ErrNoSuspects):
			t.Errorf("sdktest: the plugin reports no suspects: implement sdk.SuspectReporter")
		default:
			t.Errorf("sdktest: suspect stream: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return out
}
