package vote

import "fmt"

// Verdict is what a round concludes about one origin.
type Verdict uint8

const (
	// VerdictNone means no source settled the origin this round.
	VerdictNone Verdict = iota
	// VerdictUp means a source settled the origin as up.
	VerdictUp
	// VerdictDown means a source settled the origin as down.
	VerdictDown
)

// String returns the spelling used in output and the API: none, up, down.
func (v Verdict) String() string {
	switch v {
	case VerdictUp:
		return "up"
	case VerdictDown:
		return "down"
	default:
		return "none"
	}
}

// Tally says which votes a source judges on.
type Tally uint8

const (
	// TallyOwn judges on the source's own votes alone.
	TallyOwn Tally = iota
	// TallyCarry judges on every vote cast for the origin this round so far,
	// the source's own included.
	TallyCarry
)

// String returns the configuration spelling: own or carry.
func (t Tally) String() string {
	if t == TallyCarry {
		return "carry"
	}
	return "own"
}

// ParseTally reads the configuration spelling of a tally.
func ParseTally(s string) (Tally, error) {
	switch s {
	case "own":
		return TallyOwn, nil
	case "carry":
		return TallyCarry, nil
	}
	return TallyOwn, fmt.Errorf("tally %q is not one of \"own\", \"carry\"", s)
}

// Rule is one source's settling rule.
type Rule struct {
	MinVotes int
	Tally    Tally
}

// Counts is a number of up and down votes.
type Counts struct {
	Up, Down int32
}

// Add returns the sum of two counts.
func (c Counts) Add(o Counts) Counts { return Counts{Up: c.Up + o.Up, Down: c.Down + o.Down} }

// N is the number of votes.
func (c Counts) N() int32 { return c.Up + c.Down }

// Judge applies a source's rule. own is the source's own votes for the
// origin, carried every vote cast for it this round so far including own.
// It returns VerdictNone when the origin stays unsettled.
func Judge(r Rule, own, carried Counts) Verdict {
	v := own
	if r.Tally == TallyCarry {
		v = carried
	}
	n := v.N()
	if n == 0 || int(n) < r.MinVotes {
		return VerdictNone
	}
	switch {
	case 2*v.Up > n:
		return VerdictUp
	case 2*v.Down > n:
		return VerdictDown
	}
	return VerdictNone
}
