package simulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/vote"
)

// Step is one line of a timeline: a round or an operator action.
type Step struct {
	// Line is the 1-based line number in the timeline file.
	Line int
	// Round, when not nil, holds the votes of a round: "site/origin" ->
	// source -> votes.
	Round map[string]map[string][]vote.Verdict
	// Labels, when not nil, holds the voter label values of the round's
	// votes written as "up@pop=eu": "site/origin" -> source -> one value
	// per vote of Round ("" for a vote without a label). Path-partition
	// detection groups the votes by them (docs/partition.md).
	Labels map[string]map[string][]string
	// Confirm is set for a confirmation tick: Round holds its votes, and
	// it probes only the sites due a confirmation (docs/simulate.md).
	Confirm bool
	// Suspect names the sites a passive report made suspect just before
	// the confirmation tick.
	Suspect []string
	// Action is "switch", "disable" or "enable" for an action line.
	Action string
	Site   string
	Origin string
	Level  int
}

// LineError is a timeline line that cannot be read.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("timeline line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

type actionArgs struct {
	Site   *string `json:"site"`
	Origin *string `json:"origin"`
	Level  *int    `json:"level"`
}

// ParseTimeline reads a timeline and checks it against the configuration:
// every key names a configured site and origin, every source is declared and
// every vote is "up" or "down". Blank lines are skipped.
func ParseTimeline(r io.Reader, cfg *config.Config) ([]Step, error) {
	var steps []Step
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		st, err := parseLine(b, cfg)
		if err != nil {
			return nil, &LineError{Line: line, Err: err}
		}
		st.Line = line
		steps = append(steps, st)
	}
	if err := sc.Err(); err != nil {
		return nil, &LineError{Line: line + 1, Err: err}
	}
	return steps, nil
}

func parseLine(b []byte, cfg *config.Config) (Step, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return Step{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if raw, ok := obj["confirm"]; ok {
		return parseConfirm(raw, obj, cfg)
	}
	if len(obj) != 1 {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return Step{}, fmt.Errorf("a line holds exactly one of \"round\", \"confirm\", \"switch\", \"disable\", \"enable\"; this one has %d keys (%s)", len(obj), strings.Join(keys, ", "))
	}
	for kind, raw := range obj {
		switch kind {
		case "round":
			return parseRound(raw, cfg)
		case "switch", "disable", "enable":
			return parseAction(kind, raw)
		case "suspect":
			return Step{}, fmt.Errorf("\"suspect\" goes with a confirmation tick, such as {\"confirm\": {}, \"suspect\": [\"www\"]}")
		default:
			return Step{}, fmt.Errorf("unknown line kind %q: use \"round\", \"confirm\", \"switch\", \"disable\" or \"enable\"", kind)
		}
	}
	panic("unreachable")
}

// parseConfirm reads a confirmation tick: {"confirm": {votes as in a
// round}} with an optional "suspect": [site, ...].
func parseConfirm(raw json.RawMessage, obj map[string]json.RawMessage, cfg *config.Config) (Step, error) {
	for k := range obj {
		if k != "confirm" && k != "suspect" {
			return Step{}, fmt.Errorf("a confirmation line holds \"confirm\" and, optionally, \"suspect\"; not %q", k)
		}
	}
	st, err := parseRound(raw, cfg)
	if err != nil {
		return Step{}, fmt.Errorf("confirm: %w", err)
	}
	st.Confirm = true
	if rs, ok := obj["suspect"]; ok {
		if err := json.Unmarshal(rs, &st.Suspect); err != nil {
			return Step{}, fmt.Errorf("suspect must be a list of site names, such as [\"www\"]: %v", err)
		}
		for _, name := range st.Suspect {
			if cfg.Site(name) == nil {
				return Step{}, fmt.Errorf("suspect: there is no site named %s", name)
			}
		}
	}
	return st, nil
}

func parseRound(raw json.RawMessage, cfg *config.Config) (Step, error) {
	var votes map[string]map[string][]string
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&votes); err != nil {
		return Step{}, fmt.Errorf("round must map \"site/origin\" to {source: [\"up\"|\"down\", ...]}: %v", err)
	}
	st := Step{Round: map[string]map[string][]vote.Verdict{}}
	keys := make([]string, 0, len(votes))
	for k := range votes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		siteName, originName, ok := strings.Cut(key, "/")
		if !ok {
			return Step{}, fmt.Errorf("round key %q is not \"site/origin\"", key)
		}
		site := cfg.Site(siteName)
		if site == nil {
			return Step{}, fmt.Errorf("round key %q: there is no site named %s", key, siteName)
		}
		found := false
		for _, o := range site.Origins {
			found = found || o.Name == originName
		}
		if !found {
			return Step{}, fmt.Errorf("round key %q: site %s has no origin %s", key, siteName, originName)
		}
		bySource := map[string][]vote.Verdict{}
		srcNames := make([]string, 0, len(votes[key]))
		for n := range votes[key] {
			srcNames = append(srcNames, n)
		}
		sort.Strings(srcNames)
		for _, src := range srcNames {
			if cfg.Source(src) == nil {
				declared := make([]string, len(cfg.Sources))
				for i, s := range cfg.Sources {
					declared[i] = s.Name
				}
				return Step{}, fmt.Errorf("round key %q: unknown source %q (declared sources: %s)", key, src, strings.Join(declared, ", "))
			}
			list := make([]vote.Verdict, 0, len(votes[key][src]))
			var values []string
			for i, v := range votes[key][src] {
				word, label, labelled := strings.Cut(v, "@")
				switch word {
				case "up":
					list = append(list, vote.VerdictUp)
				case "down":
					list = append(list, vote.VerdictDown)
				default:
					return Step{}, fmt.Errorf("round key %q, source %s: vote %q is neither \"up\" nor \"down\" (a voter label is written after it, as \"down@pop=eu\")", key, src, v)
				}
				if !labelled {
					continue
				}
				value, err := voteLabel(label, cfg)
				if err != nil {
					return Step{}, fmt.Errorf("round key %q, source %s: vote %q: %w", key, src, v, err)
				}
				if values == nil {
					values = make([]string, len(votes[key][src]))
				}
				values[i] = value
			}
			bySource[src] = list
			if values != nil {
				if st.Labels == nil {
					st.Labels = map[string]map[string][]string{}
				}
				if st.Labels[key] == nil {
					st.Labels[key] = map[string][]string{}
				}
				st.Labels[key][src] = values
			}
		}
		st.Round[key] = bySource
	}
	return st, nil
}

// voteLabel reads the "pop=eu" of a vote "down@pop=eu": the voter's value
// of the label control { partition } groups by.
func voteLabel(label string, cfg *config.Config) (string, error) {
	pc := cfg.Control.Partition
	if pc == nil {
		return "", fmt.Errorf("a voter label is only read with path-partition detection: add control { partition { label = \"...\" } } to the configuration, or write the vote without \"@...\"")
	}
	name, value, ok := strings.Cut(label, "=")
	if !ok || name == "" {
		return "", fmt.Errorf("the voter label must be written name=value, such as \"down@%s=eu\"", pc.Label)
	}
	if name != pc.Label {
		return "", fmt.Errorf("the voter label %q is not the one control { partition } groups by: write \"@%s=...\"", name, pc.Label)
	}
	if value == "" {
		return "", fmt.Errorf("the label %s has no value: write a value, such as \"@%s=eu\", or the vote without \"@...\"", name, name)
	}
	return value, nil
}

func parseAction(kind string, raw json.RawMessage) (Step, error) {
	var a actionArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Step{}, fmt.Errorf("%s: %v", kind, err)
	}
	st := Step{Action: kind}
	if a.Site == nil {
		return Step{}, fmt.Errorf("%s needs \"site\"", kind)
	}
	st.Site = *a.Site
	switch kind {
	case "switch":
		if a.Level == nil {
			return Step{}, fmt.Errorf("switch needs \"level\", such as {\"switch\": {\"site\": %q, \"level\": 2}}", st.Site)
		}
		if a.Origin != nil {
			return Step{}, fmt.Errorf("switch takes \"site\" and \"level\", not \"origin\"")
		}
		st.Level = *a.Level
	default:
		if a.Origin == nil {
			return Step{}, fmt.Errorf("%s needs \"origin\", such as {%q: {\"site\": %q, \"origin\": \"a1\"}}", kind, kind, st.Site)
		}
		if a.Level != nil {
			return Step{}, fmt.Errorf("%s takes \"site\" and \"origin\", not \"level\"", kind)
		}
		st.Origin = *a.Origin
	}
	return st, nil
}
