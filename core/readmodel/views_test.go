package readmodel

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk"
)

// fake is a Snapshot of sites given whole.
type fake struct {
	round, pub uint64
	sites      []Site
	fills      int
}

func (f *fake) Len() int { return len(f.sites) }
func (f *fake) Index(name string) int {
	for i := range f.sites {
		if f.sites[i].Spec.Name == name {
			return i
		}
	}
	return -1
}
func (f *fake) Name(i int) string                   { return f.sites[i].Spec.Name }
func (f *fake) Commit() (round, publication uint64) { return f.round, f.pub }
func (f *fake) State(i int, s *SiteState) {
	f.fills++
	*s = f.sites[i].SiteState
	s.Origins = slices.Clone(s.Origins)
}
func (f *fake) Fill(i int, s *Site) {
	*s = f.sites[i]
	s.Origins = slices.Clone(s.Origins)
	s.Details = slices.Clone(s.Details)
}

func spec(name string, failback decide.Failback, healthCheck bool, levels ...int) *decide.SiteSpec {
	var os []decide.OriginSpec
	for i, l := range levels {
		os = append(os, decide.OriginSpec{Name: string(rune('a'+i)) + "1", Level: l})
	}
	return decide.NewSiteSpec(name, os, failback, 2, 3, healthCheck)
}

func site(sp *decide.SiteSpec, level int, levels []decide.Health, states ...decide.Health) Site {
	s := Site{SiteState: SiteState{Spec: sp, Level: level, Levels: levels}}
	for _, h := range states {
		s.Origins = append(s.Origins, OriginState{State: h})
		s.Details = append(s.Details, Origin{})
	}
	return s
}

const (
	U = decide.Unknown
	H = decide.Healthy
	X = decide.Unhealthy
	D = decide.Disabled
)

// TestStatus walks the status word's order, worst first.
func TestStatus(t *testing.T) {
	two := spec("two", decide.FailbackAuto, true, 1, 1, 2)
	for _, tc := range []struct {
		name string
		site Site
		want string
	}{
		{"current level unhealthy", site(two, 2, []decide.Health{X, X}, X, X, X), api.StatusDown},
		{"below the top level", site(two, 2, []decide.Health{X, H}, X, X, H), api.StatusFailedOver},
		{"an origin unhealthy on top", site(two, 1, []decide.Health{H, H}, H, X, H), api.StatusDegraded},
		{"health check off", site(spec("off", decide.FailbackAuto, false, 1, 2), 1, []decide.Health{U, U}, U, U), api.StatusPaused},
		{"one enabled origin", site(two, 1, []decide.Health{H, U}, H, D, D), api.StatusPaused},
		{"not judged yet", site(two, 1, []decide.Health{U, U}, U, U, U), api.StatusUnknown},
		{"well", site(two, 1, []decide.Health{H, H}, H, H, H), api.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{sites: []Site{tc.site}}
			if got := Status(f, 0); got != tc.want {
				t.Errorf("status %q, want %q", got, tc.want)
			}
			if got := At(f, 0).Status; got != tc.want {
				t.Errorf("the view's status %q, want %q", got, tc.want)
			}
		})
	}
}

// TestViewOfAnOrigin: the last round's verdict, votes and reason show only
// for a probed, enabled origin; before the first round since vigil
// started the origin shows why its state last changed; partitions come
// sorted by group; zero times are null.
func TestViewOfAnOrigin(t *testing.T) {
	sp := spec("www", decide.FailbackManual, true, 1, 1, 2)
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	probed := site(sp, 1, []decide.Health{H, U}, H, D, U)
	probed.Round, probed.ProbedAt, probed.Probed = 7, since.Add(time.Minute), true
	probed.Events = []decide.Event{{Kind: decide.KindOriginState, Origin: "a1", From: U, To: H}}
	for i := range probed.Details {
		o := &probed.Details[i]
		o.Cause, o.Since = "restored", since
		o.Verdict, o.By, o.Asked, o.Reason = vote.VerdictUp, "direct", []string{"direct"}, "direct: ok"
		o.Votes = []Vote{{Source: "direct", Voter: "v", Value: sdk.Up, Reason: sdk.ReasonOK, Latency: 1500 * time.Microsecond}}
	}
	probed.Details[0].Partitions = []Partition{{Group: "node/pop=us", Rounds: 3, Since: since}, {Group: "node/pop=eu", Rounds: 4, Since: since}}
	probed.Details[0].Flapping, probed.Details[0].FlappingSince = true, since
	restored := probed
	restored.Probed, restored.Events = false, nil

	f := &fake{round: 9, pub: 4, sites: []Site{probed, restored}}
	v := At(f, 0)
	a1, b1, c1 := v.Origins["a1"], v.Origins["b1"], v.Origins["c1"]
	if a1.Verdict != "up" || a1.By == nil || *a1.By != "direct" || len(a1.Votes) != 1 || a1.Votes[0].LatencyMS != 1.5 || a1.Reason != "direct: ok" {
		t.Errorf("probed origin: %+v", a1)
	}
	if b1.Verdict != "none" || b1.By != nil || len(b1.Votes) != 0 || b1.Reason != "restored" {
		t.Errorf("a disabled origin shows the round's votes: %+v", b1)
	}
	if len(a1.Partitions) != 2 || a1.Partitions[0].Group != "node/pop=eu" {
		t.Errorf("partitions %+v, want both, eu first", a1.Partitions)
	}
	if !a1.Flapping || a1.FlappingSince == nil || a1.FlappingUntil != nil || a1.QuarantineUntil != nil || c1.Flapping {
		t.Errorf("flapping: a1 %+v, c1 %+v", a1, c1)
	}
	if v.Round != 7 || v.Publication != 4 || v.LastProbe == nil || len(v.Events) != 1 || v.Events[0].Kind != api.KindOriginState {
		t.Errorf("site: round %d publication %d last probe %v events %v", v.Round, v.Publication, v.LastProbe, v.Events)
	}
	if v.Failback != "manual" || v.EffectiveFailback != "manual" || v.Thresholds != (api.Thresholds{Unhealthy: 3, Healthy: 2}) {
		t.Errorf("failback %q/%q thresholds %+v", v.Failback, v.EffectiveFailback, v.Thresholds)
	}

	r := At(f, 1)
	if o := r.Origins["a1"]; o.Verdict != "none" || len(o.Votes) != 0 || o.Reason != "restored" || o.Since == nil {
		t.Errorf("before the first round since start: %+v", o)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if evs, ok := m["events"].([]any); !ok || len(evs) != 0 {
		t.Errorf("events of an unprobed site = %v, want []", m["events"])
	}
	if SiteView(f, "nope") != nil {
		t.Error("a view of a site the snapshot lacks")
	}
}

// TestSummary counts the fleet in one pass without detail.
func TestSummary(t *testing.T) {
	manual := spec("m", decide.FailbackManual, true, 1, 2)
	auto := spec("a", decide.FailbackAuto, true, 1, 2)
	held := site(auto, 2, []decide.Health{H, H}, H, H)
	held.ManualHold = true
	f := &fake{round: 12, sites: []Site{
		site(manual, 2, []decide.Health{H, H}, H, H), // failback waiting
		site(auto, 2, []decide.Health{X, H}, X, H),   // failed over, nothing waits
		site(auto, 2, []decide.Health{X, X}, X, X),   // all unhealthy, down
		held, // a manual hold waits too
		site(auto, 1, []decide.Health{H, H}, H, H), // ok
	}}
	got := Summary(f)
	want := api.FleetSummary{Round: 12, Sites: 5, OffTopLevel: 4, AllUnhealthy: 1, FailbackWaiting: 2,
		Counts: map[string]int{api.StatusDown: 1, api.StatusFailedOver: 3, api.StatusDegraded: 0, api.StatusPaused: 0, api.StatusUnknown: 0, api.StatusOK: 1}}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("summary %s, want %s", gb, wb)
	}
	if f.fills != len(f.sites) {
		t.Errorf("%d states read for %d sites: want one pass", f.fills, len(f.sites))
	}
}
