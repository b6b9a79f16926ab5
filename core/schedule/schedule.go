package schedule

import (
	"cmp"
	"slices"
)

// Site is what the scheduler knows of one site.
type Site struct {
	Name string
	// LastProbed is the sequence number of the round that last probed the
	// site; 0 means never.
	LastProbed uint64
	// Eligible is false while the site's health checks are paused
	// (health check disabled, or fewer than two enabled origins).
	Eligible bool
}

// Picker chooses a round's sites. It keeps its buffer between rounds; it is
// not safe for concurrent use.
type Picker struct {
	order []int
}

// Pick returns the indices (into sites) of up to n eligible sites, longest
// ago first, ties by name. The returned slice is reused by the next call.
func (p *Picker) Pick(sites []Site, n int) []int {
	p.order = p.order[:0]
	for i := range sites {
		if sites[i].Eligible {
			p.order = append(p.order, i)
		}
	}
	slices.SortFunc(p.order, func(a, b int) int { return compare(&sites[a], &sites[b]) })
	p.order = p.order[:max(0, min(n, len(p.order)))]
	return p.order
}

func compare(a, b *Site) int {
	if c := cmp.Compare(a.LastProbed, b.LastProbed); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}
