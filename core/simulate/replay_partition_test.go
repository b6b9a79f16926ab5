package simulate_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/partition"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
	"github.com/vigilcdn/vigil/core/vote"
)

var updateReplay = flag.Bool("update-replay", false, "rewrite testdata/partition/*/incident.jsonl from the scenario's timeline")

// partConfig is chainConfig with control { partition } (label and
// rounds; no block when label is "").
func partConfig(t *testing.T, label string, rounds int, sources string) *config.Config {
	t.Helper()
	part := ""
	if label != "" {
		part = `
  partition {
    label  = "` + label + `"
    rounds = ` + itoa(rounds) + `
  }`
	}
	cfg, diags := config.Parse("c.hcl", []byte(`
control {
  round_interval = "10s"`+part+`
}
`+sources+`
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

const (
	nodeThenDirect = `source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}
source "direct" { plugin = "vigil-source-direct" }`
	directThenNode = `source "direct" { plugin = "vigil-source-direct" }
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}`
)

// partitionIncident is recorded with the chain node (min_votes 2, one
// voter in pop eu and one in us) then direct, control { partition {
// label = "pop", rounds = 3 } }, rounds every 10 s. a1:
//
//	rounds 1-2   node 2 up                          up by node
//	rounds 3-7   node 1 up, 1 down (eu); direct up  up by direct: eu down alone
//	rounds 8-9   node 2 up                          up by node
//
// b1: node 2 up every round. The journal: eu suspected at round 5 (its
// third round alone), ended at round 8 after 5 rounds.
func partitionIncident() *simulate.Export {
	const t0 = 1_700_000_000
	x := &simulate.Export{Header: simulate.ExportHeader{Version: simulate.ExportVersion, RoundInterval: "10s",
		Sources: []string{"node", "direct"}, Votes: true, Journal: "included", Partition: true, PartitionLabel: "pop"}}
	var pa, pb []simulate.ExportPoint
	for i := range 9 {
		at := int64(t0 + 10*i)
		p := simulate.ExportPoint{T: at, V: "up", By: "node", Votes: []simulate.ExportTally{{Src: "node", Up: 2}}, Partition: true}
		if i >= 2 && i <= 6 {
			p.By = "direct"
			p.Votes = []simulate.ExportTally{{Src: "node", Up: 1, Down: 1}, {Src: "direct", Up: 1}}
			p.DownGroups = []string{"node/pop=eu"}
		}
		pa = append(pa, p)
		pb = append(pb, simulate.ExportPoint{T: at, V: "up", By: "node", Votes: []simulate.ExportTally{{Src: "node", Up: 2}}, Partition: true})
	}
	x.Origins = []simulate.ExportOrigin{{Site: "www", Origin: "a1", Points: pa}, {Site: "www", Origin: "b1", Points: pb}}
	x.Events = []store.Event{
		{Seq: 1, Site: "www", Round: 5, Time: timeAt(pa[4].T), Event: decide.Event{Kind: decide.KindPathPartitionSuspected, Origin: "a1", Group: "node/pop=eu", Rounds: 3, Suspected: true}},
		{Seq: 2, Site: "www", Round: 8, Time: timeAt(pa[7].T), Event: decide.Event{Kind: decide.KindPathPartitionSuspected, Origin: "a1", Group: "node/pop=eu", Rounds: 5}},
	}
	return x
}

// events is a site's partition events as "round origin group
// suspected|ended rounds", the round counted from t0 in 10 s.
func events(evs []simulate.PartitionEvent) []string {
	var out []string
	for _, e := range evs {
		what := "ended"
		if e.Suspected {
			what = "suspected"
		}
		out = append(out, itoa(int(e.Time.Unix()-1_700_000_000)/10+1)+" "+e.Origin+" "+e.Group+" "+what+" "+itoa(e.Rounds))
	}
	return out
}

// The replay runs the partition rule over the recorded down groups and
// up votes: under the recording's configuration it reproduces the
// journal's path_partition_suspected events; under others it says what
// they would have done.
func TestReplayPartitions(t *testing.T) {
	var buf bytes.Buffer
	if err := partitionIncident().Write(&buf); err != nil {
		t.Fatal(err)
	}
	x, err := simulate.ReadExport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !x.Header.Partition || x.Header.PartitionLabel != "pop" || !slices.Equal(x.Origins[0].Points[3].DownGroups, []string{"node/pop=eu"}) || !x.Origins[0].Points[0].Partition {
		t.Fatalf("round trip: %+v %+v", x.Header, x.Origins[0].Points[3])
	}
	recorded := []string{"5 a1 node/pop=eu suspected 3", "8 a1 node/pop=eu ended 5"}
	for _, tc := range []struct {
		name     string
		cfg      *config.Config
		want     []string // replayed
		summary  string
		warn     string
		replayed bool
	}{
		{"the recording's configuration", partConfig(t, "pop", 3, nodeThenDirect),
			recorded, "as recorded (2 events)", "", true},
		{"rounds 2: a round sooner", partConfig(t, "pop", 2, nodeThenDirect),
			[]string{"4 a1 node/pop=eu suspected 2", "8 a1 node/pop=eu ended 5"}, "the same number of events (2), first suspicion 10 s sooner", "", true},
		{"rounds 6: never", partConfig(t, "pop", 6, nodeThenDirect),
			nil, "2 fewer events (0 instead of 2)", "", true},
		// direct settles every round alone: node is never asked, so no
		// node group votes, and none is alone.
		{"direct first", partConfig(t, "pop", 3, directThenNode),
			nil, "2 fewer events (0 instead of 2)", "", true},
		{"another label", partConfig(t, "region", 3, nodeThenDirect),
			nil, "2 recorded, not replayed", `grouped the voters by the label "pop" (its header) and this configuration groups them by "region"`, false},
		{"no partition block", partConfig(t, "", 0, nodeThenDirect),
			nil, "2 recorded, not replayed", "has no control { partition }", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := simulate.Replay(x, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Sites) != 1 || res.Partitions != tc.replayed {
				t.Fatalf("sites %+v, partitions replayed %v", res.Sites, res.Partitions)
			}
			s := res.Sites[0]
			if got := events(s.RecordedPartitions); !slices.Equal(got, recorded) {
				t.Fatalf("recorded %q, want %q", got, recorded)
			}
			if got := events(s.ReplayedPartitions); !slices.Equal(got, tc.want) {
				t.Fatalf("replayed %q, want %q", got, tc.want)
			}
			warns := strings.Join(res.Warnings, "\n")
			if (tc.warn == "") != (warns == "") || !strings.Contains(warns, tc.warn) {
				t.Fatalf("warnings %q, want %q", warns, tc.warn)
			}
			var out bytes.Buffer
			res.WriteText(&out)
			if !strings.Contains(out.String(), "\npath partitions: "+tc.summary+"\n") || !strings.Contains(out.String(), "verdict: the same number of switches (0)") {
				t.Fatalf("output, want path partitions: %s\n%s", tc.summary, out.String())
			}
			if tc.name == "the recording's configuration" {
				t.Logf("\n%s", out.String())
				end := timeAt(x.Origins[0].Points[7].T).Format("15:04:05") + " a1 node/pop=eu ended, 5 rounds"
				line := "  " + end + "  " + end + "\n"
				if !strings.Contains(out.String(), line) {
					t.Fatalf("the output has no line %q", line)
				}
			}
		})
	}
}

// An export that does not name its sources (made with -data-dir) hands
// the recorded up votes to the sources by chain position, the groups by
// their source's name, and warns that the label is taken as this
// configuration's when its groups do not name one.
func TestReplayPartitionsByPosition(t *testing.T) {
	x := partitionIncident()
	x.Header.Sources, x.Header.PartitionLabel = nil, ""
	pos := map[string]string{"node": "0", "direct": "1"}
	for i := range x.Origins {
		for j := range x.Origins[i].Points {
			for k := range x.Origins[i].Points[j].Votes {
				v := &x.Origins[i].Points[j].Votes[k]
				v.Src = pos[v.Src]
			}
		}
	}
	res, err := simulate.Replay(x, partConfig(t, "pop", 3, nodeThenDirect))
	if err != nil {
		t.Fatal(err)
	}
	if got := events(res.Sites[0].ReplayedPartitions); !slices.Equal(got, events(res.Sites[0].RecordedPartitions)) || len(got) != 2 {
		t.Fatalf("replayed %q, recorded %q", got, events(res.Sites[0].RecordedPartitions))
	}
	// Its groups name the label: no warning about it.
	if w := strings.Join(res.Warnings, "\n"); strings.Contains(w, "voter label") {
		t.Fatalf("warnings %q", w)
	}
	res, err = simulate.Replay(x, partConfig(t, "region", 3, nodeThenDirect))
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions || !strings.Contains(strings.Join(res.Warnings, "\n"), `by the label "pop" (its groups)`) {
		t.Fatalf("another label than the groups': replayed %v, warnings %q", res.Partitions, res.Warnings)
	}
}

// Rounds recorded without partition data (the rule was off then) neither
// count nor end a suspicion, and rounds whose groups the history cut are
// replayed with what it kept; both are warned.
func TestReplayPartitionGaps(t *testing.T) {
	x := partitionIncident()
	a1 := x.Origins[0].Points
	a1[5].Partition, a1[5].DownGroups = false, nil // round 6: the rule off
	a1[6].GroupsCut = true
	res, err := simulate.Replay(x, partConfig(t, "pop", 3, nodeThenDirect))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"5 a1 node/pop=eu suspected 3", "8 a1 node/pop=eu ended 4"}
	if got := events(res.Sites[0].ReplayedPartitions); !slices.Equal(got, want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	var out bytes.Buffer
	res.WriteText(&out)
	if want := "path partitions: the same number of events (2), first suspicion at the same time, not all at the recorded rounds\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("output, want %q:\n%s", want, out.String())
	}
	w := strings.Join(res.Warnings, "\n")
	if !strings.Contains(w, "1 recorded rounds of an origin carry no partition data") || !strings.Contains(w, "1 recorded rounds of an origin had more groups down than the history keeps") {
		t.Fatalf("warnings %q", w)
	}
}

// An export of version 2 (no partition data) replays as before, with a
// "no partition data" note; its journal's suspicions are still shown.
func TestReplayVersion2Export(t *testing.T) {
	var buf bytes.Buffer
	x := partitionIncident()
	x.Header.Version = 2
	if err := x.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := simulate.ReadExport(&buf)
	if err != nil || back.Header.Partition || !back.Header.Votes {
		t.Fatalf("version 2: %v, %+v", err, back.Header)
	}
	res, err := simulate.Replay(back, partConfig(t, "pop", 3, nodeThenDirect))
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions || len(res.Sites[0].ReplayedPartitions) != 0 || len(res.Sites[0].RecordedPartitions) != 2 {
		t.Fatalf("replayed %v, site %+v", res.Partitions, res.Sites[0])
	}
	if w := strings.Join(res.Warnings, "\n"); !strings.Contains(w, "no partition data: the recording (an export of version 2) keeps no voter groups") {
		t.Fatalf("warnings %q", w)
	}
}

// A history file of version 2 (written by the version 2 writer: see
// core/history/testdata) still exports and replays: its votes through the
// chain, its switches as the rules say, and a "no partition data" note.
func TestReplayVersion2HistoryFile(t *testing.T) {
	z, err := os.ReadFile(filepath.Join("..", "history", "testdata", "version2.ring.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "history.ring")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := history.ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	x := simulate.BuildExport(snap, []simulate.Names{{Site: "www", Origin: "a1"}, {Site: "www", Origin: "b1"}},
		simulate.ExportHeader{Exported: time.Now().UTC(), Names: "config", RoundInterval: "1s", Sources: []string{"node", "direct"}, Journal: "no state file", PartitionLabel: "pop"}, nil)
	if x.Header.Version != simulate.ExportVersion || !x.Header.Votes || x.Header.Partition {
		t.Fatalf("the export of a version 2 file: %+v", x.Header)
	}
	cfg, diags := config.Parse("c.hcl", []byte(`
control {
  round_interval = "1s"
  partition { label = "pop" }
}
`+nodeThenDirect+`
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "b1" {
    address = "http://127.0.0.1:2"
    level   = 2
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	res, err := simulate.Replay(x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res.WriteText(&out)
	t.Logf("\n%s", out.String())
	// a1 is down in rounds 8-11 (10:00:07 on): the failover at the third
	// (10:00:09), the failback at the second up after (10:00:12).
	var got []string
	for _, s := range res.Sites[0].Replayed {
		got = append(got, s.Time.Format("15:04:05")+" "+s.Reason)
	}
	if want := []string{"10:00:09 failover", "10:00:12 failback"}; !slices.Equal(got, want) || !res.Votes || res.Rounds != 14 {
		t.Fatalf("replayed %q in %d rounds (votes %v), want %q in 14", got, res.Rounds, res.Votes, want)
	}
	if !strings.Contains(out.String(), "warning: no partition data: the recording (its history file is of a version before 3) keeps no voter groups") {
		t.Fatalf("no note of the missing partition data:\n%s", out.String())
	}
}

// A history file of version 3 exports each round's partition data: the
// header says the points carry it, a round with the rule on says so with
// its down groups, and one with the rule off carries none.
func TestExportKeepsDownGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.ring")
	r, _, err := history.Open(path, history.Options{Origins: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	slots, err := r.Sync([]uint64{history.Key("www", "a1")})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	on := history.Obs{Slot: slots[0], Verdict: history.Up, By: 1, Partition: true, NDown: 1, DownGroups: [history.GroupSlots]string{"node/pop=eu"},
		NVotes: 2, Votes: [history.VoteSlots]history.Tally{{Source: 0, Up: 1, Down: 1}, {Source: 1, Up: 1}}}
	off := history.Obs{Slot: slots[0], Verdict: history.Up, By: 0, NVotes: 1, Votes: [history.VoteSlots]history.Tally{{Source: 0, Up: 2}}}
	for i, o := range []history.Obs{on, off} {
		if _, err := r.Record(at.Add(time.Duration(i)*time.Second), []history.Obs{o}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := history.ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := simulate.BuildExport(snap, []simulate.Names{{Site: "www", Origin: "a1"}}, simulate.ExportHeader{Names: "config", Sources: []string{"node", "direct"}}, nil).Write(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"partition":true,"down_groups":["node/pop=eu"]`) {
		t.Fatalf("the export does not carry the down groups:\n%s", buf.String())
	}
	x, err := simulate.ReadExport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	p := x.Origins[0].Points
	if !x.Header.Partition || len(p) != 2 || !p[0].Partition || !slices.Equal(p[0].DownGroups, []string{"node/pop=eu"}) || p[1].Partition || p[1].DownGroups != nil {
		t.Fatalf("header %+v, points %+v", x.Header, p)
	}
}

// scenarioT0 is the start of a scenario's first round in its
// incident.jsonl.
var scenarioT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Unix()

// TestReplayScenarios replays each scenario of testdata/partition that
// has an incident.jsonl (the export an agent would have written of its
// timeline: see its README) under the scenario's configuration: the
// replayed path partitions are the journal's, and both are what vigil
// simulate prints of the timeline, round for round; so are the
// switches. -update-replay writes incident.jsonl again from the timeline
// and simulate's output.
func TestReplayScenarios(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "partition", "*", "config.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range dirs {
		dir := filepath.Dir(c)
		if _, err := os.Stat(filepath.Join(dir, "incident.jsonl")); err != nil && !*updateReplay {
			continue
		}
		if *updateReplay && !strings.HasSuffix(dir, "-replayed") {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, steps := loadScenario(t, dir)
			var out bytes.Buffer
			if err := simulate.Run(cfg, steps, &out); err != nil {
				t.Fatal(err)
			}
			var lines []simulate.RoundLine
			sc := bufio.NewScanner(&out)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var l simulate.RoundLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, l)
			}
			interval := int64(cfg.Control.RoundInterval / time.Second)
			at := func(round int) time.Time { return time.Unix(scenarioT0+int64(round-1)*interval, 0).UTC() }
			if *updateReplay {
				writeIncident(t, filepath.Join(dir, "incident.jsonl"), cfg, steps, lines, at)
			}
			f, err := os.Open(filepath.Join(dir, "incident.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			x, err := simulate.ReadExport(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			res, err := simulate.Replay(x, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Warnings) != 0 || !res.Partitions {
				t.Fatalf("warnings %q, partitions replayed %v", res.Warnings, res.Partitions)
			}
			simParts, simSwitches := map[string][]simulate.PartitionEvent{}, map[string][]string{}
			for _, l := range lines {
				for _, ev := range l.Events {
					switch ev.Kind {
					case decide.KindPathPartitionSuspected:
						simParts[l.Site] = append(simParts[l.Site], simulate.PartitionEvent{Time: at(l.Round), Origin: ev.Origin, Group: ev.Group, Rounds: ev.Rounds, Suspected: ev.Suspected})
					case decide.KindLevelSwitched:
						simSwitches[l.Site] = append(simSwitches[l.Site], itoa(l.Round)+" "+itoa(ev.FromLevel)+"->"+itoa(ev.ToLevel))
					}
				}
			}
			for _, s := range res.Sites {
				if !slices.Equal(s.ReplayedPartitions, simParts[s.Site]) || !slices.Equal(s.RecordedPartitions, simParts[s.Site]) {
					t.Errorf("site %s: replayed %+v, recorded %+v; simulate printed %+v", s.Site, s.ReplayedPartitions, s.RecordedPartitions, simParts[s.Site])
				}
				var sw []string
				for _, r := range s.Replayed {
					sw = append(sw, itoa(r.Round)+" "+itoa(r.From)+"->"+itoa(r.To))
				}
				if !slices.Equal(sw, simSwitches[s.Site]) {
					t.Errorf("site %s: replayed switches %q, simulate's %q", s.Site, sw, simSwitches[s.Site])
				}
			}
			var text bytes.Buffer
			res.WriteText(&text)
			t.Logf("\n%s", text.String())
		})
	}
	if n == 0 {
		t.Fatal("no scenario with an incident.jsonl in testdata/partition")
	}
}

// writeIncident writes the export an agent would have made of the
// scenario: each round's verdicts as simulate printed them, the tallies
// of the sources asked and the partition rule's down groups from the
// timeline's votes, and the journal's switches and partition events.
func writeIncident(t *testing.T, path string, cfg *config.Config, steps []simulate.Step, lines []simulate.RoundLine, at func(int) time.Time) {
	t.Helper()
	h := simulate.ExportHeader{Version: simulate.ExportVersion, Exported: at(len(steps) + 1), RoundInterval: cfg.Control.RoundInterval.String(),
		Names: "config", Rounds: history.DefaultRounds, Votes: true, Journal: "included", Partition: true, PartitionLabel: cfg.Control.Partition.Label}
	for _, s := range cfg.Sources {
		h.Sources = append(h.Sources, s.Name)
	}
	x := &simulate.Export{Header: h}
	points := map[string][]simulate.ExportPoint{}
	var keys []string
	var tally partition.Tally
	for _, l := range lines {
		st := steps[l.Round-1]
		if st.Round == nil || st.Confirm {
			t.Fatalf("round %d is not a plain round: scenarios with incident.jsonl have rounds only", l.Round)
		}
		for _, o := range cfg.Sites[0].Origins {
			ol, ok := l.Origins[o.Name]
			if !ok {
				continue
			}
			key := l.Site + "/" + o.Name
			p := simulate.ExportPoint{T: at(l.Round).Unix(), V: ol.Verdict, S: ol.State, Partition: true}
			if ol.By != nil {
				p.By = *ol.By
			}
			tally.Reset()
			for _, src := range ol.Asked {
				tl := simulate.ExportTally{Src: src}
				for i, v := range st.Round[key][src] {
					switch v {
					case vote.VerdictUp:
						tl.Up++
					case vote.VerdictDown:
						tl.Down++
					default:
						tl.Abstain++
						continue
					}
					label := ""
					if ls := st.Labels[key][src]; ls != nil {
						label = ls[i]
					}
					tally.Add(partition.GroupName(src, cfg.Control.Partition.Label, label), v == vote.VerdictUp)
				}
				p.Votes = append(p.Votes, tl)
			}
			p.DownGroups = tally.DownGroups(nil)
			if points[key] == nil {
				keys = append(keys, key)
			}
			points[key] = append(points[key], p)
		}
		for _, ev := range l.Events {
			if ev.Kind == decide.KindLevelSwitched || ev.Kind == decide.KindPathPartitionSuspected {
				x.Events = append(x.Events, store.Event{Seq: uint64(len(x.Events) + 1), Time: at(l.Round), Site: l.Site, Round: uint64(l.Round), Event: ev})
			}
		}
	}
	for _, k := range keys {
		site, origin, _ := strings.Cut(k, "/")
		x.Origins = append(x.Origins, simulate.ExportOrigin{Site: site, Origin: origin, Points: points[k]})
	}
	var buf bytes.Buffer
	if err := x.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
