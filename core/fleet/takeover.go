package fleet

import (
	"cmp"
	"slices"
	"sort"
)

// PlanSites plans a round of the given sites only (indices into Sites):
// those eligible (and accepted by Owns), at most SitesPerRound of them,
// probed longest ago first, ties by name, as the scheduler orders. A
// sharded instance plans one for the sites it has just taken over, so
// that they are probed before its next round. The plan is nil when none
// of the sites is eligible. Like Plan, it reuses the previous plan's
// buffers.
func (f *Fleet) PlanSites(sites []int) *Plan {
	f.cands = f.cands[:0]
	for _, i := range sites {
		if s := f.Sites[i]; s.Eligible() && (f.Owns == nil || f.Owns(s.Spec.Name)) {
			f.cands = append(f.cands, i)
		}
	}
	if len(f.cands) == 0 {
		return nil
	}
	if len(f.cands) > f.SitesPerRound {
		slices.SortFunc(f.cands, func(a, b int) int {
			if c := cmp.Compare(f.Sites[a].LastProbed, f.Sites[b].LastProbed); c != 0 {
				return c
			}
			return cmp.Compare(a, b) // Sites is sorted by name
		})
		f.cands = f.cands[:max(f.SitesPerRound, 1)]
	}
	p := &f.plan
	p.fleet, p.Seq = f, f.Seq+1
	p.Picked = append(p.Picked[:0], f.cands...)
	sort.Ints(p.Picked)
	p.All, p.Confirm = false, false
	f.fillJobs(p)
	return p
}
