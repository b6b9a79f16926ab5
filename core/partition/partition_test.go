package partition_test

import (
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/partition"
)

type vote struct {
	group string
	up    bool
}

var (
	euDown = vote{"node/pop=eu", false}
	euUp   = vote{"node/pop=eu", true}
	usUp   = vote{"node/pop=us", true}
	usDown = vote{"node/pop=us", false}
	direct = vote{"direct", true}
)

// event is what a test expects of one event: the group, its rounds and
// whether it starts (true) or ends a suspicion.
type event struct {
	group     string
	rounds    int
	suspected bool
}

func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rounds int
		steps  [][]vote // one origin's votes, round by round
		// want are the events by round (nil: none).
		want map[int][]event
		// suspected is the number of suspicions in force after the last round.
		suspected int
	}{
		{name: "eu alone three rounds starts", rounds: 3,
			steps:     [][]vote{{euDown, usUp}, {euDown, usUp}, {euDown, usUp}},
			want:      map[int][]event{2: {{"node/pop=eu", 3, true}}},
			suspected: 1},
		{name: "two rounds are not enough", rounds: 3,
			steps: [][]vote{{euDown, usUp}, {euDown, usUp}, {euUp, usUp}}},
		{name: "a break restarts the count", rounds: 2,
			steps: [][]vote{{euDown, usUp}, {euUp, usUp}, {euDown, usUp}, {euDown, usUp}},
			want:  map[int][]event{3: {{"node/pop=eu", 2, true}}}, suspected: 1},
		{name: "ends when the group votes up", rounds: 2,
			steps: [][]vote{{euDown, usUp}, {euDown, usUp}, {euDown, usUp}, {euUp, usUp}},
			want:  map[int][]event{1: {{"node/pop=eu", 2, true}}, 3: {{"node/pop=eu", 3, false}}}},
		{name: "ends when nobody votes up", rounds: 2,
			steps: [][]vote{{euDown, usUp}, {euDown, usUp}, {euDown, usDown}},
			want:  map[int][]event{1: {{"node/pop=eu", 2, true}}, 2: {{"node/pop=eu", 2, false}}}},
		{name: "ends when the group casts no vote", rounds: 1,
			steps: [][]vote{{euDown, direct}, {usUp, direct}},
			want:  map[int][]event{0: {{"node/pop=eu", 1, true}}, 1: {{"node/pop=eu", 1, false}}}},
		{name: "everyone down is not a partition", rounds: 1,
			steps: [][]vote{{euDown, usDown}, {euDown, usDown}}},
		{name: "a split group is not alone", rounds: 1,
			steps: [][]vote{{euDown, euUp, usUp}}},
		{name: "up from another source counts", rounds: 1,
			steps: [][]vote{{euDown, usDown, direct}},
			want:  map[int][]event{0: {{"node/pop=eu", 1, true}, {"node/pop=us", 1, true}}}, suspected: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m partition.Memory
			var tally partition.Tally
			key := partition.Origin{Site: "www", Origin: "a1"}
			var susp []partition.Streak
			for r, votes := range tc.steps {
				tally.Reset()
				for _, v := range votes {
					tally.Add(v.group, v.up)
				}
				var events []decide.Event
				events, susp = m.Observe(key, &tally, tc.rounds, int64(100+r), nil, nil)
				want := tc.want[r]
				if len(events) != len(want) {
					t.Fatalf("round %d: events %v, want %v", r, events, want)
				}
				for i, ev := range events {
					w := want[i]
					if ev.Kind != decide.KindPathPartitionSuspected || ev.Origin != "a1" || ev.Group != w.group || ev.Rounds != w.rounds || ev.Suspected != w.suspected {
						t.Errorf("round %d event %d: %+v, want %+v", r, i, ev, w)
					}
				}
			}
			if len(susp) != tc.suspected {
				t.Errorf("suspicions after the last round: %+v, want %d", susp, tc.suspected)
			}
			if tc.suspected == 0 && m.Len() != 0 {
				t.Errorf("memory keeps %d origins after every suspicion ended", m.Len())
			}
		})
	}
}

func TestSinceIsTheFirstRound(t *testing.T) {
	var m partition.Memory
	var tally partition.Tally
	key := partition.Origin{Site: "www", Origin: "a1"}
	var susp []partition.Streak
	for r := range 3 {
		tally.Reset()
		tally.Add("node/pop=eu", false)
		tally.Add("node/pop=us", true)
		_, susp = m.Observe(key, &tally, 2, int64(1000+r), nil, nil)
	}
	if len(susp) != 1 || susp[0].Since != 1000 || susp[0].Rounds != 3 {
		t.Fatalf("suspicions %+v, want node/pop=eu since 1000 for 3 rounds", susp)
	}
}

func TestPrune(t *testing.T) {
	var m partition.Memory
	var tally partition.Tally
	for _, o := range []string{"a1", "a2"} {
		tally.Reset()
		tally.Add("node/pop=eu", false)
		tally.Add("direct", true)
		m.Observe(partition.Origin{Site: "www", Origin: o}, &tally, 3, 1, nil, nil)
	}
	if m.Len() != 2 {
		t.Fatalf("memory holds %d origins, want 2", m.Len())
	}
	m.Prune(func(k partition.Origin) bool { return k.Origin == "a1" })
	if m.Len() != 1 {
		t.Fatalf("after pruning a2 the memory holds %d origins, want 1", m.Len())
	}
}

func TestGroupName(t *testing.T) {
	for _, tc := range []struct{ source, label, value, want string }{
		{"node", "pop", "eu", "node/pop=eu"},
		{"direct", "pop", "", "direct"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := partition.GroupName(tc.source, tc.label, tc.value); got != tc.want {
				t.Errorf("GroupName(%q, %q, %q) = %q, want %q", tc.source, tc.label, tc.value, got, tc.want)
			}
		})
	}
}

// The down groups and the up votes are all the rule needs of a round: a
// tally rebuilt from them (the groups down, the ups as a count) judges
// every round as the tally of every vote did.
func TestDownGroupsRebuildTheRound(t *testing.T) {
	rounds := [][]vote{
		{euDown, usUp, direct}, {euDown, usUp}, {euDown, euDown, usDown, direct},
		{euDown, euUp, usUp}, {euDown, usDown}, {usUp}, {euDown, usUp},
	}
	var full, rebuilt partition.Memory
	var t1, t2 partition.Tally
	key := partition.Origin{Site: "www", Origin: "a1"}
	for r, votes := range rounds {
		t1.Reset()
		ups := 0
		for _, v := range votes {
			t1.Add(v.group, v.up)
			if v.up {
				ups++
			}
		}
		down := t1.DownGroups(nil)
		t2.Reset()
		t2.AddUps(ups)
		for _, g := range down {
			t2.Add(g, false)
		}
		e1, _ := full.Observe(key, &t1, 2, int64(r), nil, nil)
		e2, _ := rebuilt.Observe(key, &t2, 2, int64(r), nil, nil)
		if len(e1) != len(e2) {
			t.Fatalf("round %d: events %+v from every vote, %+v rebuilt from the down groups %q", r, e1, e2, down)
		}
		for i := range e1 {
			if e1[i] != e2[i] {
				t.Errorf("round %d event %d: %+v from every vote, %+v rebuilt", r, i, e1[i], e2[i])
			}
		}
	}
	if full.Len() != rebuilt.Len() {
		t.Errorf("memory: %d origins from every vote, %d rebuilt", full.Len(), rebuilt.Len())
	}
}

func TestDownGroups(t *testing.T) {
	for _, tc := range []struct {
		name  string
		votes []vote
		want  []string
	}{
		{"one pop down", []vote{euDown, usUp}, []string{"node/pop=eu"}},
		{"nobody up: none", []vote{euDown, usDown}, nil},
		{"a split group is not down", []vote{euDown, euUp, usDown, direct}, []string{"node/pop=us"}},
		{"every group up", []vote{euUp, usUp}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tally partition.Tally
			for _, v := range tc.votes {
				tally.Add(v.group, v.up)
			}
			got := tally.DownGroups(nil)
			if len(got) != len(tc.want) {
				t.Fatalf("DownGroups = %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("DownGroups = %q, want %q", got, tc.want)
				}
			}
		})
	}
}
