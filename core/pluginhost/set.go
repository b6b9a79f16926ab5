package pluginhost

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// Member is what a Set holds: a vote source that is started once and
// closed once (a Source, or an in-process fake in tests).
type Member interface {
	Name() string
	Start(ctx context.Context) hcl.Diagnostics
	Close()
}

// Set is the chain's sources in force, in chain order, each with the key
// of the source block it was started from. The zero Set is empty. A Set is
// a value: Next returns a new one and leaves the old one as it was, so
// that a caller can keep the old set running until it installs the new
// one.
type Set[T Member] struct {
	members []T
	keys    []string
}

// Members are the set's sources in chain order. The caller must not
// modify the slice.
func (s Set[T]) Members() []T { return s.members }

// Key fingerprints what a source block means for its plugin: a changed
// key means the plugin must be restarted on reload. The config block
// counts by its meaning (config.Source.ConfigDigest), so a comment or a
// reformat restarts nothing.
func Key(pluginDir string, s *config.Source) string {
	return fmt.Sprintf("%s|%s|%s|%v|%v|%s|%d|%d|%s|%s", s.Name, s.Plugin, s.Checksum, s.Env, s.PlaintextTransport, s.Timeout, s.MinVotes, s.Tally,
		pluginDir, s.ConfigDigest())
}

// Next is the set for the sources of cfg: a source whose key is the same
// as one of s's keeps that running member (it is not restarted); the
// others are made with newMember and started concurrently, each bounded
// by its own start timeout. When one fails to start, every member Next
// started is closed, the diagnostics say why, and s is untouched. Next
// does not close s's members that the new set leaves out: Retire does,
// once the new set is installed.
func (s Set[T]) Next(ctx context.Context, cfg *config.Config, newMember func(src *config.Source) T) (Set[T], hcl.Diagnostics) {
	next := Set[T]{members: make([]T, len(cfg.Sources)), keys: make([]string, len(cfg.Sources))}
	reused := make([]bool, len(s.members))
	fresh := make([]bool, len(cfg.Sources))
	for i, src := range cfg.Sources {
		next.keys[i] = Key(cfg.Control.PluginDir, src)
		found := false
		for j, k := range s.keys {
			if k == next.keys[i] && !reused[j] {
				next.members[i], reused[j], found = s.members[j], true, true
				break
			}
		}
		if !found {
			next.members[i], fresh[i] = newMember(src), true
		}
	}
	diags := make([]hcl.Diagnostics, len(next.members))
	var wg sync.WaitGroup
	for i, m := range next.members {
		if fresh[i] {
			wg.Go(func() { diags[i] = m.Start(ctx) })
		}
	}
	wg.Wait()
	var all hcl.Diagnostics
	for _, d := range diags {
		all = append(all, d...)
	}
	if all.HasErrors() {
		var started []T
		for i, m := range next.members {
			if fresh[i] {
				started = append(started, m)
			}
		}
		closeAll(started)
		return s, all
	}
	return next, all
}

// Retire closes the members of s that next does not hold, concurrently (a
// plugin may take a moment to exit).
func (s Set[T]) Retire(next Set[T]) {
	var gone []T
	for _, m := range s.members {
		kept := false
		for _, n := range next.members {
			if Member(m) == Member(n) {
				kept = true
				break
			}
		}
		if !kept {
			gone = append(gone, m)
		}
	}
	closeAll(gone)
}

// Close closes every member.
func (s Set[T]) Close() { closeAll(s.members) }

func closeAll[T Member](list []T) {
	var wg sync.WaitGroup
	for _, m := range list {
		wg.Go(m.Close)
	}
	wg.Wait()
}
