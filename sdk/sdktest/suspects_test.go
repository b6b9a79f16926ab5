package sdktest_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
	"github.com/vigilcdn/vigil/sdk/sdktest"
	"github.com/vigilcdn/vigil/sdk/sdktest/internal/echo"
)

// hangGuard only catches a hang: nothing here is timed.
const hangGuard = 60 * time.Second

func next(t *testing.T, ch <-chan sdk.Suspect) sdk.Suspect {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("the suspect stream ended")
		}
		return s
	case <-time.After(hangGuard):
		t.Fatal("no suspect came")
	}
	return sdk.Suspect{}
}

// TestSuspectsOverGRPC: a plugin's suspects reach the host, in-process
// and from the built binary started as vigil starts it.
func TestSuspectsOverGRPC(t *testing.T) {
	bin := sdktest.Build(t, "./testdata/echosource")
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) sdk.VoteSource
	}{
		{"in-process", func(t *testing.T) sdk.VoteSource { return sdktest.InProcess(t, echo.New()) }},
		{"subprocess", func(t *testing.T) sdk.VoteSource { return sdktest.Launch(t, bin) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.start(t)
			sdktest.Configure(t, src, sdk.Config{Values: map[string]any{"voter": "edge-1"}})
			suspects := sdktest.Suspects(t, src)
			ballot := sdk.Ballot{Round: 3, Targets: []sdk.Target{{Site: "www", Origin: "a1"}, {Site: "suspect-api", Origin: "b2"}}}
			if _, err := src.Vote(context.Background(), ballot); err != nil {
				t.Fatal(err)
			}
			got := next(t, suspects)
			if want := (sdk.Suspect{Site: "suspect-api", Origin: "b2", Detail: "round 3"}); got != want {
				t.Fatalf("suspect %+v, want %+v", got, want)
			}
		})
	}
}

type closing struct{ plain }

func (closing) Suspects(context.Context) <-chan sdk.Suspect {
	ch := make(chan sdk.Suspect, 1)
	ch <- sdk.Suspect{Site: "www"}
	close(ch)
	return ch
}

type nilChannel struct{ plain }

func (nilChannel) Suspects(context.Context) <-chan sdk.Suspect { return nil }

// TestWatchSuspectsEnds: how the host's side of the stream ends, for each
// kind of plugin.
func TestWatchSuspectsEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		impl    sdk.VoteSource
		want    error
		reports int
	}{
		{"a plugin without suspects", plain{}, sdk.ErrNoSuspects, 0},
		{"a plugin whose Suspects returns nil", nilChannel{}, sdk.ErrNoSuspects, 0},
		{"a plugin that closes its channel", closing{}, io.EOF, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := sdktest.InProcess(t, tc.impl)
			w, ok := src.(host.SuspectWatcher)
			if !ok {
				t.Fatal("the host-side client does not offer WatchSuspects")
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			n := 0
			err := w.WatchSuspects(ctx, func(sdk.Suspect) { n++ })
			if !errors.Is(err, tc.want) {
				t.Fatalf("WatchSuspects: %v, want %v", err, tc.want)
			}
			if n != tc.reports {
				t.Fatalf("%d suspects reported, want %d", n, tc.reports)
			}
		})
	}
	t.Run("the host ends the stream", func(t *testing.T) {
		src := sdktest.InProcess(t, echo.New())
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- src.(host.SuspectWatcher).WatchSuspects(ctx, func(sdk.Suspect) {}) }()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("WatchSuspects after cancel: %v, want context.Canceled", err)
			}
		case <-time.After(hangGuard):
			t.Fatal("WatchSuspects did not return after its context ended")
		}
	})
}
