package publish_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

func TestWaitWakesOnPublish(t *testing.T) {
	h := publish.NewHub()
	got := make(chan uint64, 1)
	go func() {
		s, ok := h.Wait(context.Background(), 0)
		if ok {
			got <- s.Version
		}
	}()
	h.Publish(&publication.Snapshot{Version: 3})
	select {
	case v := <-got:
		if v != 3 {
			t.Fatalf("woke with version %d, want 3", v)
		}
	case <-time.After(time.Minute):
		t.Fatal("waiter not woken by Publish")
	}
}

func TestWaitReturnsAtOnceWhenNewer(t *testing.T) {
	h := publish.NewHub()
	h.Publish(&publication.Snapshot{Version: 5})
	h.Publish(&publication.Snapshot{Version: 4}) // older: ignored
	s, ok := h.Wait(context.Background(), 2)
	if !ok || s.Version != 5 {
		t.Fatalf("Wait = %d %v, want 5 true", s.Version, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := h.Wait(ctx, 5); ok {
		t.Fatal("Wait reported a new version where there is none")
	}
}
