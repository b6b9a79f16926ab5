package vote

import "context"

// MaxSources is the longest chain a Walker handles (a site's sources are a
// bit set).
const MaxSources = 64

// Target is one origin handed to a source, by the caller's indices.
type Target struct {
	Site, Origin int32
}

// Source answers for the chain's sources. The daemon implements it with
// plugins, `vigil simulate` with a timeline.
type Source interface {
	// Ask hands targets to chain source number source and fills votes[i]
	// with that source's votes for targets[i]. votes arrives zeroed; a
	// source that fails, times out or abstains leaves zeros (no votes).
	Ask(ctx context.Context, source int, targets []Target, votes []Counts)
}

// Outcome is what the chain concluded for one origin in one round.
type Outcome struct {
	// Skip keeps the origin out of the chain (a disabled origin). Set by
	// the caller; the walker leaves it as it is.
	Skip bool
	// Verdict is up, down or none.
	Verdict Verdict
	// By is the chain index of the source that settled the origin, or -1.
	By int8
	// Asked is how many of the site's sources the origin was handed to:
	// they are the first Asked of the site's sources in chain order.
	Asked int8
	// Carried is every vote cast for the origin this round.
	Carried Counts
}

// Job is one probed site: which chain sources it uses and one Outcome per
// origin, which the walker fills.
type Job struct {
	Site     int32
	Sources  uint64 // bit i set: chain source i is used by this site
	Outcomes []Outcome
}

type ref struct{ job, origin int32 }

// Walker walks the chain. It keeps its buffers between rounds so that a
// steady-state round allocates nothing; it is not safe for concurrent use.
type Walker struct {
	Rules []Rule

	targets []Target
	refs    []ref
	votes   []Counts
}

// Walk runs one round of the chain over jobs: for each source in order it
// hands every still-unsettled origin of the sites that use it to src.Ask in
// one batch, then judges each of them by the source's rule.
func (w *Walker) Walk(ctx context.Context, src Source, jobs []Job) {
	for j := range jobs {
		outs := jobs[j].Outcomes
		for o := range outs {
			outs[o] = Outcome{Skip: outs[o].Skip, By: -1}
		}
	}
	for s, rule := range w.Rules {
		if s >= MaxSources {
			break
		}
		bit := uint64(1) << s
		w.targets, w.refs = w.targets[:0], w.refs[:0]
		for j := range jobs {
			job := &jobs[j]
			if job.Sources&bit == 0 {
				continue
			}
			for o := range job.Outcomes {
				out := &job.Outcomes[o]
				if out.Skip || out.Verdict != VerdictNone {
					continue
				}
				w.targets = append(w.targets, Target{Site: job.Site, Origin: int32(o)})
				w.refs = append(w.refs, ref{job: int32(j), origin: int32(o)})
			}
		}
		if len(w.targets) == 0 {
			continue
		}
		if cap(w.votes) < len(w.targets) {
			w.votes = make([]Counts, len(w.targets))
		}
		w.votes = w.votes[:len(w.targets)]
		clear(w.votes)
		src.Ask(ctx, s, w.targets, w.votes)
		for i, r := range w.refs {
			out := &jobs[r.job].Outcomes[r.origin]
			own := w.votes[i]
			if own.Up < 0 || own.Down < 0 { // a Source must not do this; treat as no votes
				own = Counts{}
			}
			out.Asked++
			out.Carried = out.Carried.Add(own)
			if v := Judge(rule, own, out.Carried); v != VerdictNone {
				out.Verdict, out.By = v, int8(s)
			}
		}
	}
}
