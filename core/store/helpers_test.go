package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// fill commits n sites, events journal events, a probe mark per site and
// a cursor. heavy sites have three origins with every field set.
func fill(tb testing.TB, s store.Store, n, events int, heavy bool) store.Meta {
	tb.Helper()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	meta := store.Meta{Round: 42, Publication: 7, PublicationDigest: "sha256:0123456789abcdef"}
	const chunk = 5000
	for i := 0; i < n; i += chunk {
		var b store.Batch
		for j := i; j < min(i+chunk, n); j++ {
			name := fmt.Sprintf("site-%06d.example.com", j)
			b.Sites = append(b.Sites, siteRecord(j, now, heavy))
			b.Probed = append(b.Probed, store.Probe{Site: name, Round: 42, At: now})
		}
		b.Meta = meta
		if err := s.Commit(ctx, b); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 0; i < events; i += chunk {
		var b store.Batch
		for j := i; j < min(i+chunk, events); j++ {
			b.Events = append(b.Events, store.Event{Seq: uint64(j + 1), Time: now, Site: fmt.Sprintf("site-%06d.example.com", j%max(n, 1)), Round: 42,
				Event: decide.Event{Kind: decide.KindFailbackAvailable, Level: 1}})
		}
		meta.LastEvent = uint64(min(i+chunk, events))
		b.Meta = meta
		if err := s.Commit(ctx, b); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.SetCursor(ctx, "hook", meta.LastEvent); err != nil {
		tb.Fatal(err)
	}
	return meta
}

func siteRecord(j int, now time.Time, heavy bool) store.Site {
	name := fmt.Sprintf("site-%06d.example.com", j)
	if !heavy {
		return store.Site{Name: name, Level: 1 + j%2, ManualHold: j%10 == 0, Baseline: map[int]string{1: "healthy"}, LastProbed: 41,
			Origins: map[string]store.Origin{"a1": {State: "healthy"}, "b1": {State: "healthy"}}}
	}
	return store.Site{
		Name: name, Level: 1 + j%2, ManualHold: j%10 == 0, Baseline: map[int]string{1: "healthy", 2: "healthy"},
		LastProbed: 41, LastProbedAt: now,
		Origins: map[string]store.Origin{
			"a1": {State: "healthy", Successes: 3, Since: now},
			"a2": {State: "healthy", Successes: 3, Since: now},
			"b1": {State: "unhealthy", Failures: 2, Reason: "connect: connection refused", Since: now},
		},
	}
}

var zeroTime time.Time
