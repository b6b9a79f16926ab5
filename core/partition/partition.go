package partition

import "github.com/vigilcdn/vigil/core/decide"

// GroupName is the name of the group of a voter of source whose label
// has value: "node/pop=eu", or the source's name alone ("direct") for a
// voter without the label.
func GroupName(source, label, value string) string {
	if value == "" {
		return source
	}
	return source + "/" + label + "=" + value
}

// Group is one group's up and down votes for an origin in a round
// (abstentions are not counted).
type Group struct {
	Name     string
	Up, Down int
}

// Tally puts one origin's votes of a round in groups. Its zero value is
// ready; Reset empties it for the next origin and keeps its buffer.
type Tally struct {
	groups []Group
	ups    int
}

// Reset empties the tally.
func (t *Tally) Reset() {
	t.groups = t.groups[:0]
	t.ups = 0
}

// Add counts one vote (up or down) of the group named group.
func (t *Tally) Add(group string, up bool) {
	g := -1
	for i := range t.groups {
		if t.groups[i].Name == group {
			g = i
			break
		}
	}
	if g < 0 {
		t.groups = append(t.groups, Group{Name: group})
		g = len(t.groups) - 1
	}
	if up {
		t.groups[g].Up++
		t.ups++
	} else {
		t.groups[g].Down++
	}
}

// Groups are the groups counted since the last Reset, in the order their
// first vote came.
func (t *Tally) Groups() []Group { return t.groups }

// AddUps counts n up votes whose voters' groups are not known, only that
// they voted up: like any up vote they make a down group alone, and they
// are in no group that could be. A replay counts the recorded up votes
// this way (the history keeps each source's up votes as a count, and the
// down groups by name: DownGroups).
func (t *Tally) AddUps(n int) { t.ups += max(n, 0) }

// DownGroups appends to dst the names of the groups whose every vote was
// down, in the order their first vote came, when some vote was up; none
// when no vote was up, since no group can then be alone. With each
// source's up votes, it is all the rule needs of a round to judge it
// again: what the history keeps for a replay.
func (t *Tally) DownGroups(dst []string) []string {
	if t.ups == 0 {
		return dst
	}
	for _, g := range t.groups {
		if g.Up == 0 && g.Down > 0 {
			dst = append(dst, g.Name)
		}
	}
	return dst
}

// alone reports whether g is alone against the others: it voted, every
// one of its votes is down, and some vote outside it is up.
func (t *Tally) alone(g Group) bool {
	return g.Up == 0 && g.Down > 0 && t.ups > 0
}

func (t *Tally) anyAlone() bool {
	for _, g := range t.groups {
		if t.alone(g) {
			return true
		}
	}
	return false
}

// Origin names an origin of a site.
type Origin struct{ Site, Origin string }

// Streak is a group alone against the others for an origin: for how many
// probed rounds in a row, since when (the start of its first round, as
// the caller gave it), and whether it is suspected (Rounds reached the
// configured rounds).
type Streak struct {
	Group     string
	Rounds    int
	Since     int64
	Suspected bool
	seen      bool
}

// Memory is the detector's memory between rounds: one streak for each
// origin and group currently alone against the others, dropped as soon
// as the group is not alone any more. Its zero value is ready.
type Memory struct {
	streaks map[Origin][]Streak
}

// Len is the number of origins with a streak.
func (m *Memory) Len() int { return len(m.streaks) }

// Observe applies the rule to one origin's tally in a probed round of its
// site starting at at (any time unit; it comes back as a Streak's
// Since): rounds is how many rounds in a row make a suspicion. It appends
// the start and end events of suspicions to events, and the origin's
// suspicions in force after the round to susp (in the order the groups
// were first alone), and returns both. A round in which every group
// agrees allocates nothing.
//
// Call it once per probed round for every origin the round judged: a
// round that does not probe the site neither counts nor resets.
func (m *Memory) Observe(key Origin, t *Tally, rounds int, at int64, events []decide.Event, susp []Streak) ([]decide.Event, []Streak) {
	streaks := m.streaks[key]
	if len(streaks) == 0 && !t.anyAlone() {
		return events, susp
	}
	for i := range streaks {
		streaks[i].seen = false
	}
	for _, g := range t.groups {
		if !t.alone(g) {
			continue
		}
		j := -1
		for i := range streaks {
			if streaks[i].Group == g.Name {
				j = i
			}
		}
		if j < 0 {
			streaks = append(streaks, Streak{Group: g.Name, Since: at})
			j = len(streaks) - 1
		}
		st := &streaks[j]
		st.seen = true
		st.Rounds++
		if !st.Suspected && st.Rounds >= rounds {
			st.Suspected = true
			events = append(events, decide.Event{Kind: decide.KindPathPartitionSuspected, Origin: key.Origin, Group: g.Name, Rounds: st.Rounds, Suspected: true})
		}
	}
	kept := streaks[:0]
	for _, st := range streaks {
		switch {
		case st.seen:
			kept = append(kept, st)
			if st.Suspected {
				susp = append(susp, st)
			}
		case st.Suspected:
			events = append(events, decide.Event{Kind: decide.KindPathPartitionSuspected, Origin: key.Origin, Group: st.Group, Rounds: st.Rounds, Suspected: false})
		}
	}
	if len(kept) == 0 {
		delete(m.streaks, key)
		return events, susp
	}
	if m.streaks == nil {
		m.streaks = map[Origin][]Streak{}
	}
	m.streaks[key] = kept
	return events, susp
}

// Prune forgets the streaks of the origins keep says are gone (after a
// reload).
func (m *Memory) Prune(keep func(Origin) bool) {
	for k := range m.streaks {
		if !keep(k) {
			delete(m.streaks, k)
		}
	}
}
