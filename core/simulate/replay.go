package simulate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/core/vote"
)

// ExportVersion is the version of the history export format
// (docs/replay.md). Version 2 adds each round's per-source tallies,
// version 3 the down groups of the path-partition rule, version 4 the
// milliseconds of each round's time (t_ms); versions 1 (verdicts only),
// 2 (no partition data) and 3 (whole seconds) are still read.
const ExportVersion = 4

// oldestExportVersion is the oldest version ReadExport reads.
const oldestExportVersion = 1

// ExportHeader is the first line of an export.
type ExportHeader struct {
	Version int `json:"vigil_history_export"`
	// Exported is when the export was made.
	Exported time.Time `json:"exported"`
	// RoundInterval is the recording's round_interval, when known.
	RoundInterval string `json:"round_interval,omitempty"`
	// Sources is the recording's chain, when known: a point's "by".
	Sources []string `json:"sources,omitempty"`
	// Names says where the site and origin names came from: "config"
	// or "state".
	Names string `json:"names"`
	// Rounds is how many rounds the file kept an origin.
	Rounds int `json:"rounds"`
	// Votes says the points carry each round's per-source tallies
	// (false: verdicts only, a history file of version 1 or an export of
	// version 1).
	Votes bool `json:"votes"`
	// Journal says whether the journal's events are in the export, and if
	// not, why.
	Journal string `json:"journal"`
	// ConfirmInterval is the recording's shortest confirm_interval, when
	// known and set: the recording has confirmation rounds, and a recorded
	// round less than round_interval after the round before it is one.
	ConfirmInterval string `json:"confirm_interval,omitempty"`
	// Partition says the points carry the partition rule's data (a
	// history file of version 3): a point's partition, down_groups and
	// groups_cut. False for older files and exports.
	Partition bool `json:"partition"`
	// PartitionLabel is the voter label the recording's rule grouped the
	// votes by (control { partition { label } }), when known (-config)
	// and set.
	PartitionLabel string `json:"partition_label,omitempty"`
}

// ExportOrigin is one origin's recorded rounds, oldest first.
type ExportOrigin struct {
	Site   string        `json:"site"`
	Origin string        `json:"origin"`
	Points []ExportPoint `json:"points"`
}

// ExportPoint is one recorded round of one origin.
type ExportPoint struct {
	// T is the round's start, Unix seconds.
	T int64 `json:"t"`
	// TMs is the milliseconds of the round's start past T, 0-999
	// (version 4; an older export kept whole seconds).
	TMs int `json:"t_ms,omitempty"`
	// V is the verdict: up, down or none.
	V string `json:"v"`
	// By is the settling source ("" for none; its chain position when the
	// chain's names are not known).
	By string `json:"by,omitempty"`
	// S is the origin's state after the round.
	S  string  `json:"s"`
	MS float64 `json:"ms,omitempty"`
	// Votes are the round's tallies of the sources asked, in chain order
	// (with a header's votes true).
	Votes []ExportTally `json:"votes,omitempty"`
	// Partition is set when the recording's path-partition rule ran in
	// the round (with a header's partition true): DownGroups are then the
	// groups (docs/partition.md) whose every vote was down, in a round
	// with an up vote, and GroupsCut says the history left some out.
	Partition  bool     `json:"partition,omitempty"`
	DownGroups []string `json:"down_groups,omitempty"`
	GroupsCut  bool     `json:"groups_cut,omitempty"`
}

// At is the round's start in Unix milliseconds.
func (p ExportPoint) At() int64 { return p.T*1000 + int64(min(max(p.TMs, 0), 999)) }

// ExportTally is one source's votes for one origin in one round.
type ExportTally struct {
	// Src names the source (a name of the header's sources, or its chain
	// position when the chain's names are not known).
	Src     string `json:"src"`
	Up      int    `json:"up,omitempty"`
	Down    int    `json:"down,omitempty"`
	Abstain int    `json:"abstain,omitempty"`
}

// Export is a whole export in memory.
type Export struct {
	Header  ExportHeader
	Origins []ExportOrigin
	// Events are the journal's events of the exported sites (the
	// recorded switches among them).
	Events []store.Event
}

// Names maps a site and origin to their history key.
type Names struct{ Site, Origin string }

// BuildExport names the snapshot's origins: names lists every site and
// origin that may be in it (the configuration's or the state's); origins
// of the file that none names are left out. sources is the recording's
// chain (nil when not known); events the journal (nil when not read).
func BuildExport(snap *history.Snapshot, names []Names, h ExportHeader, events []store.Event) *Export {
	h.Version, h.Rounds, h.Votes, h.Partition = ExportVersion, snap.Rounds, snap.VoteSlots > 0, snap.GroupSlots > 0
	x := &Export{Header: h}
	srcName := func(i int8) string {
		if int(i) < len(h.Sources) {
			return h.Sources[i]
		}
		return fmt.Sprint(i)
	}
	sites := map[string]bool{}
	for _, n := range names {
		o, ok := snap.Origins[history.Key(n.Site, n.Origin)]
		if !ok || len(o.Points) == 0 {
			continue
		}
		eo := ExportOrigin{Site: n.Site, Origin: n.Origin, Points: make([]ExportPoint, 0, len(o.Points))}
		for _, p := range o.Points {
			ep := ExportPoint{T: p.Time.Unix(), TMs: p.Time.Nanosecond() / int(time.Millisecond), V: p.Verdict.String(), S: p.State.String(), MS: float64(p.Latency/(100*time.Microsecond)) / 10}
			if name, ok := drillSourceName(p.By, h.Sources); ok { // replay_drill.go
				ep.By = name
			} else if p.By >= 0 {
				ep.By = srcName(p.By)
			}
			for _, v := range p.Votes {
				ep.Votes = append(ep.Votes, ExportTally{Src: srcName(v.Source), Up: int(v.Up), Down: int(v.Down), Abstain: int(v.Abstain)})
			}
			ep.Partition, ep.DownGroups, ep.GroupsCut = p.Partition, p.DownGroups, p.GroupsCut
			if len(ep.DownGroups) == 0 {
				ep.DownGroups = nil
			}
			eo.Points = append(eo.Points, ep)
		}
		x.Origins = append(x.Origins, eo)
		sites[n.Site] = true
	}
	sort.Slice(x.Origins, func(a, b int) bool {
		if x.Origins[a].Site != x.Origins[b].Site {
			return x.Origins[a].Site < x.Origins[b].Site
		}
		return x.Origins[a].Origin < x.Origins[b].Origin
	})
	for _, e := range events {
		if sites[e.Site] {
			x.Events = append(x.Events, e)
		}
	}
	return x
}

// Write writes x as JSON lines: the header, one line per origin, one per
// journal event ({"event": ...}).
func (x *Export) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	if err := enc.Encode(x.Header); err != nil {
		return err
	}
	for _, o := range x.Origins {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	for _, e := range x.Events {
		if err := enc.Encode(struct {
			Event store.Event `json:"event"`
		}{e}); err != nil {
			return err
		}
	}
	return nil
}

// ReadExport reads what Write wrote.
func ReadExport(r io.Reader) (*Export, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	x := &Export{}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		if line == 1 {
			if err := json.Unmarshal(b, &x.Header); err != nil || x.Header.Version == 0 {
				return nil, fmt.Errorf("line 1: not a vigil history export (vigil history export writes one): %v", err)
			}
			if x.Header.Version < oldestExportVersion || x.Header.Version > ExportVersion {
				return nil, fmt.Errorf("line 1: export version %d; this vigil reads versions %d to %d", x.Header.Version, oldestExportVersion, ExportVersion)
			}
			if x.Header.Version < 2 {
				x.Header.Votes = false // version 1 kept verdicts only
			}
			if x.Header.Version < 3 {
				x.Header.Partition = false // nor did version 2 keep voter groups
			}
			continue
		}
		var probe struct {
			Event *store.Event `json:"event"`
			Site  string       `json:"site"`
		}
		if err := json.Unmarshal(b, &probe); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		if probe.Event != nil {
			x.Events = append(x.Events, *probe.Event)
			continue
		}
		var o ExportOrigin
		if err := json.Unmarshal(b, &o); err != nil || o.Site == "" || o.Origin == "" {
			return nil, fmt.Errorf("line %d: neither an origin nor an event: %v", line, err)
		}
		x.Origins = append(x.Origins, o)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if line == 0 {
		return nil, fmt.Errorf("the export is empty")
	}
	return x, nil
}

// Switch is one level switch of a replay or a recording.
type Switch struct {
	Time     time.Time
	Round    int // the replay's round, 1-based; 0 for a recorded switch between recorded rounds
	From, To int
	Reason   string
}

// SiteReplay is one site's recorded and replayed switches, and its
// recorded and replayed path partitions (path_partition_suspected).
type SiteReplay struct {
	Site     string
	Recorded []Switch
	Replayed []Switch

	RecordedPartitions []PartitionEvent
	ReplayedPartitions []PartitionEvent

	// RecordedNotices and ReplayedNotices are the failback notices
	// (failback_available) and the flap holds (origin_flapping) of the
	// journal and of the replay.
	RecordedNotices []Notice
	ReplayedNotices []Notice
}

// Notice is a failback notice or a flap hold's start or end, in a
// replay or a recording.
type Notice struct {
	Time time.Time
	// Kind is "failback_available" (Level) or "origin_flapping" (Origin,
	// Flapping: the hold began, or ended).
	Kind     string
	Level    int
	Origin   string
	Flapping bool
}

func noticeOf(at time.Time, ev decide.Event) (Notice, bool) {
	switch ev.Kind {
	case decide.KindFailbackAvailable:
		return Notice{Time: at, Kind: ev.Kind.String(), Level: ev.Level}, true
	case decide.KindOriginFlapping:
		return Notice{Time: at, Kind: ev.Kind.String(), Origin: ev.Origin, Flapping: ev.Flapping}, true
	}
	return Notice{}, false
}

func (n Notice) text() string {
	at := n.Time.Format("15:04:05")
	switch {
	case n.Kind == decide.KindFailbackAvailable.String():
		return fmt.Sprintf("%s level %d failback notice", at, n.Level)
	case n.Flapping:
		return fmt.Sprintf("%s %s flap hold", at, n.Origin)
	}
	return fmt.Sprintf("%s %s flap hold ended", at, n.Origin)
}

// automatic reports whether a switch is the rules' own (a failover or a
// failback), which a replay of votes can reproduce; an operator's switch
// (manual) or a configuration's (config) is not replayed.
func (s Switch) automatic() bool { return s.Reason == "failover" || s.Reason == "failback" }

// ReplayResult is the outcome of Replay.
type ReplayResult struct {
	Rounds int
	// Confirmations counts the recorded confirmation rounds replayed as
	// confirmations (this configuration has confirm_interval); Skipped
	// confirmations those left out (it has none).
	Confirmations, SkippedConfirmations int
	From, To                            time.Time
	Sites                               []SiteReplay
	// Skipped are the export's origins the configuration has not.
	Skipped []string
	// Warnings say what the replay could not honour.
	Warnings []string
	// Votes is set when the recorded votes went through the chain of the
	// configuration (min_votes, tally and the order replayed); otherwise
	// the recorded verdicts were replayed.
	Votes bool
	// Partitions is set when the path-partition rule ran over the
	// recorded rounds (this configuration has control { partition } and
	// the recording has partition data).
	Partitions bool
}

// Replay runs the recorded rounds of x through a fresh fleet of cfg on
// the round clock: each recorded round is one round, and a gap in the
// recording longer than one and a half round_interval of cfg is filled with
// empty rounds (no verdict), so that cfg's durations (quarantine,
// failback_dwell, flap) count the time that passed.
//
// With votes in the export (its header's votes), each round's recorded
// tallies are handed to the sources of cfg's chain by name, and the real
// chain (core/vote) settles each origin under cfg's min_votes, tally and
// order: a source cfg adds has no votes (it abstains), a recorded source
// cfg has not is ignored, and a source the recording never asked about an
// origin (an earlier one settled it) has no votes for it. Without votes,
// an origin's recorded verdict is handed to the first source of its site's
// chain as min_votes votes of that verdict, so the chain settles it as
// recorded and chain settings change nothing.
func Replay(x *Export, cfg *config.Config) (*ReplayResult, error) {
	res := &ReplayResult{Votes: x.Header.Votes}
	f := fleet.NewRoundClock(cfg)
	// Rounds: the distinct recorded times, in Unix milliseconds.
	byTime := map[int64]map[string]vote.Verdict{}
	votesAt := map[int64]map[string][]ExportTally{}
	for _, o := range x.Origins {
		s := f.Site(o.Site)
		if s == nil || s.Spec.OriginIndex(o.Origin) < 0 {
			res.Skipped = append(res.Skipped, o.Site+"/"+o.Origin)
			continue
		}
		for _, p := range o.Points {
			var v vote.Verdict
			switch p.V {
			case "up":
				v = vote.VerdictUp
			case "down":
				v = vote.VerdictDown
			default:
				continue
			}
			if byTime[p.At()] == nil {
				byTime[p.At()] = map[string]vote.Verdict{}
			}
			byTime[p.At()][o.Site+"/"+o.Origin] = v
		}
		if res.Votes {
			for _, p := range o.Points {
				if len(p.Votes) == 0 {
					continue
				}
				if votesAt[p.At()] == nil {
					votesAt[p.At()] = map[string][]ExportTally{}
				}
				votesAt[p.At()][o.Site+"/"+o.Origin] = p.Votes
			}
		}
		// A none verdict is a round too: mark it.
		for _, p := range o.Points {
			if byTime[p.At()] == nil {
				byTime[p.At()] = map[string]vote.Verdict{}
			}
		}
	}
	times := make([]int64, 0, len(byTime))
	for t := range byTime {
		times = append(times, t)
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	if len(times) == 0 {
		return nil, fmt.Errorf("the history holds no round of a site of this configuration")
	}
	interval := cfg.Control.RoundInterval
	if x.Header.RoundInterval != "" {
		if d, err := time.ParseDuration(x.Header.RoundInterval); err == nil && d != interval {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the recording's round_interval is %s and this configuration's %s: the replay keeps the recorded rounds and counts this configuration's durations in rounds of %s", d, interval, interval))
		}
	}
	var src vote.Source
	vsrc := &verdictSource{f: f}
	tsrc := &tallySource{f: f, byPosition: len(x.Header.Sources) == 0}
	src = vsrc
	if res.Votes {
		src = tsrc
		res.Warnings = append(res.Warnings, chainWarnings(x.Header.Sources, f)...)
	}
	drills, nDrill := x.drillRounds() // replay_drill.go
	dsrc := &drillSource{inner: src, f: f}
	if nDrill > 0 {
		src = dsrc
		res.Warnings = append(res.Warnings, drillWarning(nDrill))
	}
	recPartitions := map[string][]PartitionEvent{}
	for _, e := range x.Events {
		if e.Event.Kind == decide.KindPathPartitionSuspected && f.Site(e.Site) != nil && e.Time.UnixMilli() >= times[0] &&
			e.Time.UnixMilli() <= times[len(times)-1]+max(interval, time.Second).Milliseconds() {
			ev := e.Event
			recPartitions[e.Site] = append(recPartitions[e.Site], PartitionEvent{Time: roundAt(times, e.Time), Origin: ev.Origin, Group: ev.Group, Rounds: ev.Rounds, Suspected: ev.Suspected})
		}
	}
	pr := newReplayPartition(x, cfg, f, len(recPartitions) > 0, &res.Warnings)
	res.Partitions = pr != nil
	replayed := map[string][]Switch{}
	replayedNotices := map[string][]Notice{}
	round := 0
	setRound := func(t int64, ok bool) {
		vsrc.round, tsrc.round, dsrc.round = nil, nil, nil
		if ok {
			vsrc.round, tsrc.round, dsrc.round = byTime[t], votesAt[t], drills[t]
		}
	}
	note := func(at time.Time, t int64, ok bool, reports []fleet.Report) {
		for _, rep := range reports {
			for _, ev := range rep.Events {
				if ev.Kind == decide.KindLevelSwitched {
					replayed[rep.Site.Spec.Name] = append(replayed[rep.Site.Spec.Name], Switch{Time: at, Round: round, From: ev.FromLevel, To: ev.ToLevel, Reason: ev.Reason.String()})
				}
				if n, ok := noticeOf(at, ev); ok {
					replayedNotices[rep.Site.Spec.Name] = append(replayedNotices[rep.Site.Spec.Name], n)
				}
			}
		}
		pr.observe(f, reports, t, ok, at)
	}
	step := func(at time.Time, t int64, ok bool) {
		round++
		setRound(t, ok)
		note(at, t, ok, f.Round(context.Background(), src))
	}
	// Confirmation rounds (docs/replay.md): a recorded round less than
	// the recording's round_interval after the last round is one, when
	// the recording has them (an export before version 4 kept whole
	// seconds: the interval counts in whole seconds there, as it did).
	recInterval := interval
	if d, err := time.ParseDuration(x.Header.RoundInterval); err == nil && d > 0 {
		recInterval = d
	}
	confirming := hasConfirm(cfg)
	recConfirms := x.Header.ConfirmInterval != ""
	if !recConfirms && x.Header.RoundInterval == "" && confirming {
		recConfirms = true
		res.Warnings = append(res.Warnings, "the export does not say whether it recorded confirmation rounds: a recorded round less than round_interval after the one before it is taken for one")
	}
	limit := recInterval.Milliseconds()
	if x.Header.Version < 4 {
		limit = int64(recInterval/time.Second) * 1000
	}
	isConfirm := func(i int, last int64) bool {
		return recConfirms && i > 0 && limit > 0 && times[i]-last < limit
	}
	const maxFill = 10000
	last := int64(0)
	for i, t := range times {
		if isConfirm(i, last) {
			if !confirming {
				res.SkippedConfirmations++
				continue
			}
			res.Confirmations++
			setRound(t, true)
			reports, _ := f.Confirm(context.Background(), src)
			note(time.UnixMilli(t).UTC(), t, true, reports)
			continue
		}
		if i > 0 && interval > 0 {
			gap := time.Duration(t-last) * time.Millisecond
			if gap > interval*3/2 {
				n := int((gap+interval/2)/interval) - 1
				for k := 1; k <= min(n, maxFill); k++ {
					step(time.UnixMilli(last).Add(time.Duration(k)*interval).UTC(), 0, false)
				}
			}
		}
		step(time.UnixMilli(t).UTC(), t, true)
		last = t
	}
	switch {
	case res.SkippedConfirmations > 0:
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d recorded confirmation rounds are not replayed: this configuration sets no confirm_interval", res.SkippedConfirmations))
	case confirming && res.Confirmations == 0:
		res.Warnings = append(res.Warnings, "this configuration sets confirm_interval, but the recording has no confirmation rounds: a replay cannot make the probes they would have made, so its sites are judged by the recorded rounds alone")
	}
	res.Warnings = append(res.Warnings, pr.warnings()...)
	res.Rounds = round
	res.From, res.To = time.UnixMilli(times[0]).UTC(), time.UnixMilli(times[len(times)-1]).UTC()
	recorded := map[string][]Switch{}
	recordedNotices := map[string][]Notice{}
	for _, e := range x.Events {
		if f.Site(e.Site) == nil {
			continue
		}
		if e.Time.UnixMilli() < times[0] || e.Time.UnixMilli() > times[len(times)-1]+max(interval, time.Second).Milliseconds() {
			continue
		}
		if n, ok := noticeOf(roundAt(times, e.Time), e.Event); ok {
			recordedNotices[e.Site] = append(recordedNotices[e.Site], n)
		}
		if e.Event.Kind != decide.KindLevelSwitched {
			continue
		}
		recorded[e.Site] = append(recorded[e.Site], Switch{Time: roundAt(times, e.Time), From: e.Event.FromLevel, To: e.Event.ToLevel, Reason: e.Event.Reason.String()})
	}
	if x.Header.Journal != "included" {
		res.Warnings = append(res.Warnings, "the export has no journal ("+x.Header.Journal+"): the recorded switches are unknown")
	}
	names := map[string]bool{}
	for n := range recorded {
		names[n] = true
	}
	for n := range replayed {
		names[n] = true
	}
	for n := range recordedNotices {
		names[n] = true
	}
	for n := range replayedNotices {
		names[n] = true
	}
	for n := range recPartitions {
		names[n] = true
	}
	for _, o := range x.Origins {
		if f.Site(o.Site) != nil {
			names[o.Site] = true
		}
	}
	for n := range names {
		sr := SiteReplay{Site: n, Recorded: recorded[n], Replayed: replayed[n], RecordedPartitions: recPartitions[n],
			RecordedNotices: recordedNotices[n], ReplayedNotices: replayedNotices[n]}
		if pr != nil {
			sr.ReplayedPartitions = pr.events[n]
		}
		res.Sites = append(res.Sites, sr)
	}
	sort.Slice(res.Sites, func(a, b int) bool { return res.Sites[a].Site < res.Sites[b].Site })
	return res, nil
}

// hasConfirm reports whether some site of cfg has confirm_interval.
func hasConfirm(cfg *config.Config) bool {
	for _, s := range cfg.Sites {
		if s.HealthCheck != nil && s.HealthCheck.ConfirmInterval > 0 {
			return true
		}
	}
	return false
}

// ShortestConfirm is the shortest confirm_interval of cfg's sites, "" when
// none has one (an export's header: ExportHeader.ConfirmInterval).
func ShortestConfirm(cfg *config.Config) string {
	var d time.Duration
	for _, s := range cfg.Sites {
		if s.HealthCheck == nil {
			continue
		}
		if ci := s.HealthCheck.ConfirmInterval; ci > 0 && (d == 0 || ci < d) {
			d = ci
		}
	}
	if d == 0 {
		return ""
	}
	return d.String()
}

// roundAt is the start of the recorded round a journaled event belongs
// to: the last round that started at or before it (times in Unix
// milliseconds).
func roundAt(times []int64, t time.Time) time.Time {
	i := sort.Search(len(times), func(i int) bool { return times[i] > t.UnixMilli() })
	if i == 0 {
		return t.UTC().Truncate(time.Millisecond)
	}
	return time.UnixMilli(times[i-1]).UTC()
}

// verdictSource hands each recorded verdict to the first source of the
// origin's site, as min_votes votes of that verdict.
type verdictSource struct {
	f     *fleet.Fleet
	round map[string]vote.Verdict
}

func (v *verdictSource) Ask(_ context.Context, source int, targets []vote.Target, counts []vote.Counts) {
	n := max(v.f.Chain[source].Rule.MinVotes, 1)
	for i, tg := range targets {
		s := v.f.Sites[tg.Site]
		if len(s.SourceList) == 0 || s.SourceList[0] != source {
			continue
		}
		switch v.round[s.Spec.Name+"/"+s.Spec.Origins[tg.Origin].Name] {
		case vote.VerdictUp:
			counts[i].Up += int32(n)
		case vote.VerdictDown:
			counts[i].Down += int32(n)
		}
	}
}

// chainWarnings says how the recorded chain (names, nil when unknown)
// meets f's.
func chainWarnings(recorded []string, f *fleet.Fleet) []string {
	if len(recorded) == 0 {
		return []string{"the export does not name its sources (made with -data-dir): the recorded votes are handed to this configuration's sources by chain position"}
	}
	var out []string
	rec := map[string]bool{}
	for _, n := range recorded {
		rec[n] = true
	}
	mine := map[string]bool{}
	for _, c := range f.Chain {
		mine[c.Name] = true
		if !rec[c.Name] {
			out = append(out, fmt.Sprintf("source %q is not in the recording: it has no votes (it abstains)", c.Name))
		}
	}
	for _, n := range recorded {
		if !mine[n] {
			out = append(out, fmt.Sprintf("the recorded source %q is not in this configuration: its votes are ignored", n))
		}
	}
	return out
}

// tallySource hands each origin's recorded tallies to the sources of the
// chain by name (by chain position when byPosition): abstentions are
// never counted, as in a real round.
type tallySource struct {
	f          *fleet.Fleet
	byPosition bool
	round      map[string][]ExportTally
}

func (v *tallySource) Ask(_ context.Context, source int, targets []vote.Target, counts []vote.Counts) {
	name := v.f.Chain[source].Name
	if v.byPosition {
		name = strconv.Itoa(source)
	}
	for i, tg := range targets {
		s := v.f.Sites[tg.Site]
		for _, t := range v.round[s.Spec.Name+"/"+s.Spec.Origins[tg.Origin].Name] {
			if t.Src == name {
				counts[i].Up += int32(max(t.Up, 0))
				counts[i].Down += int32(max(t.Down, 0))
			}
		}
	}
}

// Summary is the one-line verdict: how many automatic switches more or
// fewer, and how much later or sooner the first failover came, over
// every site. The recording's operator switches (manual, config) are not
// counted: a replay of votes makes none, so it compares automatic
// switches with automatic switches, and says how many it left out.
func (r *ReplayResult) Summary() string {
	rec, rep, operator := 0, 0, 0
	var shift []time.Duration
	for _, s := range r.Sites {
		for _, sw := range s.Recorded {
			if sw.automatic() {
				rec++
			} else {
				operator++
			}
		}
		for _, sw := range s.Replayed {
			if sw.automatic() {
				rep++
			}
		}
		a, b := firstFailover(s.Recorded), firstFailover(s.Replayed)
		if a != nil && b != nil {
			shift = append(shift, b.Time.Sub(a.Time))
		}
	}
	var out string
	switch d := rep - rec; {
	case d == 0:
		out = fmt.Sprintf("the same number of switches (%d)", rep)
	case d < 0:
		out = fmt.Sprintf("%d fewer switch%s (%d instead of %d)", -d, plural(-d), rep, rec)
	default:
		out = fmt.Sprintf("%d more switch%s (%d instead of %d)", d, plural(d), rep, rec)
	}
	if len(shift) > 0 {
		var sum time.Duration
		for _, d := range shift {
			sum += d
		}
		avg := sum / time.Duration(len(shift))
		switch {
		case avg > 0:
			out += fmt.Sprintf(", failover %s later", fmtDur(avg))
		case avg < 0:
			out += fmt.Sprintf(", failover %s sooner", fmtDur(-avg))
		default:
			out += ", failover at the same time"
		}
	}
	if operator > 0 {
		out += fmt.Sprintf("; %d recorded operator switch%s not counted (a replay makes none)", operator, plural(operator))
	}
	return out
}

// noticeSummary compares the failback notices and the flap holds of the
// recording and of the replay: "" when neither has any.
func (r *ReplayResult) noticeSummary() string {
	var recN, repN, recF, repF int
	for _, s := range r.Sites {
		for _, n := range s.RecordedNotices {
			if n.Kind == decide.KindFailbackAvailable.String() {
				recN++
			} else if n.Flapping {
				recF++
			}
		}
		for _, n := range s.ReplayedNotices {
			if n.Kind == decide.KindFailbackAvailable.String() {
				repN++
			} else if n.Flapping {
				repF++
			}
		}
	}
	if recN+repN+recF+repF == 0 {
		return ""
	}
	return fmt.Sprintf("failback notices %d recorded, %d replayed; flap holds %d recorded, %d replayed", recN, repN, recF, repF)
}

func firstFailover(sw []Switch) *Switch {
	for i := range sw {
		if sw[i].Reason == "failover" {
			return &sw[i]
		}
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

func fmtDur(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", int(d/time.Second))
	}
	return d.String()
}

// WriteText prints the side-by-side timelines and the verdict.
func (r *ReplayResult) WriteText(w io.Writer) {
	how := "verdicts only: chain settings are not replayed"
	if r.Votes {
		how = "votes: through this configuration's chain, min_votes, tally and the order replayed"
	}
	confirms := ""
	if r.Confirmations > 0 {
		confirms = fmt.Sprintf(" and %d confirmation rounds", r.Confirmations)
	}
	fmt.Fprintf(w, "replayed %d rounds%s, %s to %s (%s)\n", r.Rounds, confirms, r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), how)
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "warning: %d recorded origins are not in this configuration: %v\n", len(r.Skipped), r.Skipped)
	}
	for _, s := range r.Sites {
		fmt.Fprintf(w, "\nsite %s\n  %-36s  %s\n", s.Site, "recorded", "replayed")
		for i := 0; i < max(len(s.Recorded), len(s.Replayed)); i++ {
			a, b := "", ""
			if i < len(s.Recorded) {
				a = s.Recorded[i].text()
				if !s.Recorded[i].automatic() {
					a += " (operator)"
				}
			}
			if i < len(s.Replayed) {
				b = s.Replayed[i].text()
			}
			fmt.Fprintf(w, "  %-36s  %s\n", a, b)
		}
		if len(s.Recorded)+len(s.Replayed) == 0 {
			fmt.Fprintf(w, "  %-36s  %s\n", "no switch", "no switch")
		}
		if len(s.RecordedNotices)+len(s.ReplayedNotices) > 0 {
			fmt.Fprintf(w, "  failback notices and flap holds\n")
			for i := 0; i < max(len(s.RecordedNotices), len(s.ReplayedNotices)); i++ {
				a, b := "", ""
				if i < len(s.RecordedNotices) {
					a = s.RecordedNotices[i].text()
				}
				if i < len(s.ReplayedNotices) {
					b = s.ReplayedNotices[i].text()
				}
				fmt.Fprintf(w, "  %-36s  %s\n", a, b)
			}
		}
		if len(s.RecordedPartitions)+len(s.ReplayedPartitions) > 0 {
			fmt.Fprintf(w, "  path partitions\n")
			width := 36
			for _, e := range s.RecordedPartitions {
				width = max(width, len(e.text()))
			}
			for i := 0; i < max(len(s.RecordedPartitions), len(s.ReplayedPartitions)); i++ {
				a, b := "", ""
				if i < len(s.RecordedPartitions) {
					a = s.RecordedPartitions[i].text()
				}
				if i < len(s.ReplayedPartitions) {
					b = s.ReplayedPartitions[i].text()
				}
				fmt.Fprintf(w, "  %-*s  %s\n", width, a, b)
			}
		}
	}
	fmt.Fprintf(w, "\nverdict: %s\n", r.Summary())
	if n := r.noticeSummary(); n != "" {
		fmt.Fprintf(w, "notices: %s\n", n)
	}
	if p := r.partitionSummary(); p != "" {
		fmt.Fprintf(w, "path partitions: %s\n", p)
	}
}

func (s Switch) text() string {
	return fmt.Sprintf("%s %d -> %d %s", s.Time.Format("15:04:05"), s.From, s.To, s.Reason)
}
