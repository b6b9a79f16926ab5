package engine

import (
	"sync"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/fleet"
)

// RecentRounds is how many of a source's latest rounds GET /v1/sources
// counts failures over.
const RecentRounds = 10

// sourceTrouble keeps, by source name, how each source fared in the last
// rounds that asked it: what operators see of a failing source in
// GET /v1/sources, vigil status and the status page. A round that did not
// ask a source (the sources before it settled every origin) leaves its
// record alone. Records are by name, so they survive a reload.
type sourceTrouble struct {
	mu sync.Mutex
	m  map[string]*sourceRecord
}

type sourceRecord struct {
	lastErr   string
	lastErrAt time.Time
	streak    int    // rounds in a row that failed, up to the last one
	recent    uint16 // bit i: the i-th latest round failed
	asked     int    // rounds asked, at most RecentRounds
}

// note records the round the asker ran.
func (t *sourceTrouble) note(chain []fleet.ChainSource, a *chainAsker, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*sourceRecord{}
	}
	for i, cs := range chain {
		if i >= len(a.asked) || !a.asked[i] {
			continue
		}
		r := t.m[cs.Name]
		if r == nil {
			r = &sourceRecord{}
			t.m[cs.Name] = r
		}
		r.recent = (r.recent << 1) & (1<<RecentRounds - 1)
		r.asked = min(r.asked+1, RecentRounds)
		if err := a.errs[i]; err != nil {
			r.recent |= 1
			r.streak++
			r.lastErr, r.lastErrAt = err.Error(), now
		} else {
			r.streak = 0
		}
	}
}

// fill adds the source's record to si.
func (t *sourceTrouble) fill(si *api.SourceInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.m[si.Name]
	if r == nil {
		return
	}
	si.LastError = r.lastErr
	if !r.lastErrAt.IsZero() {
		at := r.lastErrAt.UTC()
		si.LastErrorAt = &at
	}
	si.FailingRounds = r.streak
	si.RecentRounds = r.asked
	for b := r.recent; b != 0; b &= b - 1 {
		si.RecentFailures++
	}
}
