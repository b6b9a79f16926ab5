package vote_test

import (
	"context"
	"testing"

	"github.com/vigilcdn/vigil/core/vote"
)

func TestJudge(t *testing.T) {
	own := vote.Rule{MinVotes: 2, Tally: vote.TallyOwn}
	carry := vote.Rule{MinVotes: 2, Tally: vote.TallyCarry}
	one := vote.Rule{MinVotes: 1}
	c := func(up, down int32) vote.Counts { return vote.Counts{Up: up, Down: down} }
	tests := []struct {
		name         string
		rule         vote.Rule
		own, carried vote.Counts
		want         vote.Verdict
	}{
		{"no votes abstain", one, c(0, 0), c(0, 0), vote.VerdictNone},
		{"one up settles with min 1", one, c(1, 0), c(1, 0), vote.VerdictUp},
		{"one down settles with min 1", one, c(0, 1), c(0, 1), vote.VerdictDown},
		{"below min_votes", own, c(1, 0), c(1, 0), vote.VerdictNone},
		{"two of three up", own, c(2, 1), c(2, 1), vote.VerdictUp},
		{"two of three down", own, c(1, 2), c(1, 2), vote.VerdictDown},
		{"tie is no majority", own, c(1, 1), c(1, 1), vote.VerdictNone},
		{"own ignores carried votes", own, c(0, 1), c(3, 1), vote.VerdictNone},
		{"carry adds earlier votes", carry, c(0, 2), c(1, 3), vote.VerdictDown},
		{"carry tie passes on", carry, c(1, 1), c(2, 2), vote.VerdictNone},
		{"carry reaches min with earlier votes", carry, c(1, 0), c(2, 0), vote.VerdictUp},
		{"carry below min", carry, c(1, 0), c(1, 0), vote.VerdictNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := vote.Judge(tt.rule, tt.own, tt.carried); got != tt.want {
				t.Fatalf("Judge = %s, want %s", got, tt.want)
			}
		})
	}
}

// scripted answers from a table: source -> target -> counts.
type scripted struct {
	votes map[int]map[vote.Target]vote.Counts
	asked map[int][]vote.Target
}

func (s *scripted) Ask(_ context.Context, source int, targets []vote.Target, votes []vote.Counts) {
	if s.asked == nil {
		s.asked = map[int][]vote.Target{}
	}
	for i, tg := range targets {
		s.asked[source] = append(s.asked[source], tg)
		votes[i] = s.votes[source][tg]
	}
}

func TestWalkerSettledOriginsAreNotPassedOn(t *testing.T) {
	w := vote.Walker{Rules: []vote.Rule{{MinVotes: 2}, {MinVotes: 2, Tally: vote.TallyCarry}, {MinVotes: 1}}}
	t0, t1, t2 := vote.Target{Site: 7, Origin: 0}, vote.Target{Site: 7, Origin: 1}, vote.Target{Site: 7, Origin: 2}
	src := &scripted{votes: map[int]map[vote.Target]vote.Counts{
		0: {t0: {Up: 2}, t1: {Up: 1, Down: 1}, t2: {Up: 1}},
		1: {t0: {Down: 5}, t1: {Down: 2}, t2: {}},
		2: {t2: {Down: 1}},
	}}
	jobs := []vote.Job{{Site: 7, Sources: 0b111, Outcomes: make([]vote.Outcome, 4)}}
	jobs[0].Outcomes[3].Skip = true // disabled
	w.Walk(context.Background(), src, jobs)
	out := jobs[0].Outcomes
	tests := []struct {
		name    string
		got     vote.Outcome
		verdict vote.Verdict
		by      int8
		asked   int8
	}{
		{"settled by first", out[0], vote.VerdictUp, 0, 1},
		{"tie carried into second", out[1], vote.VerdictDown, 1, 2},
		{"left to the last", out[2], vote.VerdictDown, 2, 3},
		{"skipped", out[3], vote.VerdictNone, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got.Verdict != tt.verdict || tt.got.By != tt.by || tt.got.Asked != tt.asked {
				t.Fatalf("outcome %+v, want verdict %s by %d asked %d", tt.got, tt.verdict, tt.by, tt.asked)
			}
		})
	}
	if len(src.asked[1]) != 2 || len(src.asked[2]) != 1 || src.asked[2][0] != t2 {
		t.Fatalf("asked %v: settled origins must not be passed on", src.asked)
	}
	for _, tg := range append(src.asked[0], src.asked[1]...) {
		if tg.Origin == 3 {
			t.Fatalf("a skipped origin was handed to a source")
		}
	}
}

func TestWalkerSiteSubset(t *testing.T) {
	w := vote.Walker{Rules: []vote.Rule{{MinVotes: 1}, {MinVotes: 1}}}
	src := &scripted{votes: map[int]map[vote.Target]vote.Counts{1: {{Site: 0, Origin: 0}: {Up: 1}}, 0: {{Site: 0, Origin: 0}: {Down: 1}}}}
	jobs := []vote.Job{{Site: 0, Sources: 0b10, Outcomes: make([]vote.Outcome, 1)}}
	w.Walk(context.Background(), src, jobs)
	if o := jobs[0].Outcomes[0]; o.Verdict != vote.VerdictUp || o.By != 1 || o.Asked != 1 {
		t.Fatalf("outcome %+v: a site that does not use source 0 must not be judged by it", o)
	}
	if len(src.asked[0]) != 0 {
		t.Fatalf("source 0 was asked about a site that does not use it")
	}
}

func TestWalkerIgnoresNegativeCounts(t *testing.T) {
	w := vote.Walker{Rules: []vote.Rule{{MinVotes: 1}}}
	src := &scripted{votes: map[int]map[vote.Target]vote.Counts{0: {{}: {Up: -5, Down: 1}}}}
	jobs := []vote.Job{{Sources: 1, Outcomes: make([]vote.Outcome, 1)}}
	w.Walk(context.Background(), src, jobs)
	if o := jobs[0].Outcomes[0]; o.Verdict != vote.VerdictNone {
		t.Fatalf("outcome %+v from garbage counts", o)
	}
}
