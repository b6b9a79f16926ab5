package publish_test

import (
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/core/vote"
	"github.com/vigilcdn/vigil/sdk/publication"
)

const twoSites = `
source "direct" { plugin = "vigil-source-direct" }
site "api" {
  hostname = "api.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18011" }
  origin "a2" { address = "http://127.0.0.1:18012" }
}
`

// TestBuilder: the first publication keeps the stored version for the
// content stored, a change makes a new version with only the changed
// entry rebuilt, no change publishes nothing, and a published snapshot is
// never written into afterwards.
func TestBuilder(t *testing.T) {
	cfg, diags := config.Parse("test.hcl", []byte(twoSites))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	f := fleet.New(cfg)
	var b publish.Builder
	c := b.Prepare(f.Sites, nil, true, 0, "")
	if c.Version != 1 || !c.Publish {
		t.Fatalf("first publication of an empty store: version %d publish %v, want 1, true", c.Version, c.Publish)
	}
	stored := c.Digest()
	first := b.Apply(c, len(f.Sites), true)
	if first == nil || len(first.Sites) != 2 || first.Sites[0].Name != "api" || len(first.Sites[1].Origins) != 2 {
		t.Fatalf("first snapshot %+v", first)
	}

	// A restart with the same content keeps the stored version.
	var again publish.Builder
	if c := again.Prepare(f.Sites, nil, true, 1, stored); c.Version != 1 || !c.Publish {
		t.Errorf("a restart with the stored content: version %d, want the stored 1", c.Version)
	}

	// Nothing changed: nothing to publish.
	if c := b.Prepare(f.Sites, []int{0, 1}, false, 1, stored); c.Publish || c.Version != 1 {
		t.Errorf("no change: version %d publish %v", c.Version, c.Publish)
	}

	// www's a2 is disabled: a new version, www's entry without a2.
	www := f.Sites[1]
	www.State.Origins[1].State = decide.Disabled
	c = b.Prepare(f.Sites, []int{1}, false, 1, stored)
	if !c.Publish || c.Version != 2 || c.Digest() == stored {
		t.Fatalf("a change: version %d publish %v", c.Version, c.Publish)
	}
	second := b.Apply(c, len(f.Sites), false)
	if len(second.Sites[1].Origins) != 1 || second.Sites[1].Origins[0].Name != "a1" {
		t.Errorf("www after disabling a2: %+v", second.Sites[1])
	}
	if len(first.Sites[1].Origins) != 2 {
		t.Errorf("the first snapshot, which readers may hold, was written into: %+v", first.Sites[1])
	}
	if second.Sites[0].Name != "api" {
		t.Errorf("the unchanged entry was lost: %+v", second.Sites[0])
	}
}

const rampSite = `
control { round_interval = "30s" }
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
    ramp {
      steps    = [10, 50, 100]
      interval = "30s"
    }
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
  origin "b2" {
    address = "http://127.0.0.1:18004"
    level   = 2
  }
}
`

// TestBuilderRamp: a failback ramp is in the site's entry (the level left
// and its origins that are not unhealthy) with Format 2, each step makes a
// new version, and the end of the ramp takes the Ramp and the Format away.
func TestBuilderRamp(t *testing.T) {
	cfg, diags := config.Parse("test.hcl", []byte(rampSite))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	f := fleet.NewRoundClock(cfg)
	s := f.Sites[0]
	var b publish.Builder
	version := uint64(0)
	publishNow := func() *publication.Snapshot {
		c := b.Prepare(f.Sites, []int{0}, version == 0, version, "")
		version = c.Version
		return b.Apply(c, len(f.Sites), version == 1)
	}
	round := func(a1, b1, b2 decide.Verdict) {
		levels := make([]decide.Health, len(s.Spec.Levels))
		f.Seq++
		decide.RoundAt(s.Spec, s.State, []decide.Verdict{a1, b1, b2}, levels, nil, int64(f.Seq))
	}
	up, down := vote.VerdictUp, vote.VerdictDown
	round(up, up, up)
	if snap := publishNow(); snap.Format != 0 || snap.Sites[0].Ramp != nil {
		t.Fatalf("no ramp: format %d ramp %+v", snap.Format, snap.Sites[0].Ramp)
	}
	round(down, up, down) // failover to 2
	round(up, up, down)   // failback to 1, a ramp from 2 (b2 unhealthy: not in it)
	snap := publishNow()
	r := snap.Sites[0].Ramp
	if snap.Format != publication.FormatRamp || r == nil || r.Weight != 10 || r.From != 2 || len(r.FromOrigins) != 1 || r.FromOrigins[0].Name != "b1" {
		t.Fatalf("ramp: format %d ramp %+v", snap.Format, r)
	}
	v := snap.Version
	round(up, up, down) // the step: 50
	snap = publishNow()
	if snap == nil || snap.Version != v+1 || snap.Sites[0].Ramp == nil || snap.Sites[0].Ramp.Weight != 50 {
		t.Fatalf("a step makes a new version: %+v", snap)
	}
	round(up, up, down) // 100: over
	snap = publishNow()
	if snap == nil || snap.Format != 0 || snap.Sites[0].Ramp != nil || snap.Sites[0].Level != 1 {
		t.Fatalf("the end of the ramp: %+v", snap)
	}
}

const threeLevels = `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18002"
    level   = 2
  }
  origin "b2" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
  origin "c1" {
    address = "http://127.0.0.1:18004"
    level   = 3
  }
}
site "one" {
  hostname = "one.example.com"
  origin "a1" { address = "http://127.0.0.1:18011" }
  origin "a2" { address = "http://127.0.0.1:18012" }
}
`

// TestEntryBackup: a site's Backup is the level a failover would choose
// now (after the current level ascending, then before it; the first
// healthy, else the first unknown) with its enabled origins that are not
// unhealthy, and none when no other level may serve.
func TestEntryBackup(t *testing.T) {
	const U, H, X, D = decide.Unknown, decide.Healthy, decide.Unhealthy, decide.Disabled
	tests := []struct {
		name  string
		level int
		// states of a1, b1, b2, c1
		states [4]decide.Health
		want   int      // the backup level, 0 for none
		names  []string // its origins
	}{
		{"all unknown: the next level", 1, [4]decide.Health{U, U, U, U}, 2, []string{"b1", "b2"}},
		{"healthy before unknown", 1, [4]decide.Health{H, U, U, H}, 3, []string{"c1"}},
		{"first healthy after the current level", 1, [4]decide.Health{H, H, U, H}, 2, []string{"b1", "b2"}},
		{"unhealthy origins left out", 1, [4]decide.Health{H, X, H, H}, 2, []string{"b2"}},
		{"disabled origins left out", 1, [4]decide.Health{H, D, U, U}, 2, []string{"b2"}},
		{"an unhealthy level is passed over", 1, [4]decide.Health{H, X, X, U}, 3, []string{"c1"}},
		{"a level of disabled origins is passed over", 1, [4]decide.Health{H, D, D, U}, 3, []string{"c1"}},
		{"after the current level, then before it", 2, [4]decide.Health{H, H, H, H}, 3, []string{"c1"}},
		{"wraps to the levels before", 3, [4]decide.Health{U, H, U, H}, 2, []string{"b1", "b2"}},
		{"wraps: the first unknown", 3, [4]decide.Health{U, X, X, H}, 1, []string{"a1"}},
		{"every other level unhealthy: none", 1, [4]decide.Health{H, X, D, X}, 0, nil},
	}
	cfg, diags := config.Parse("test.hcl", []byte(threeLevels))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fleet.New(cfg)
			s := f.Sites[1] // sorted by name: "one", "www"
			if s.Spec.Name != "www" {
				t.Fatalf("site %q, want www", s.Spec.Name)
			}
			s.State.Level = tt.level
			for i, h := range tt.states {
				s.State.Origins[i].State = h
			}
			e := publish.Entry(s)
			if tt.want == 0 {
				if e.Backup != nil {
					t.Fatalf("backup %+v, want none", e.Backup)
				}
				return
			}
			if e.Backup == nil || e.Backup.Level != tt.want {
				t.Fatalf("backup %+v, want level %d", e.Backup, tt.want)
			}
			var names []string
			for _, o := range e.Backup.Origins {
				names = append(names, o.Name)
				if o.State == "unhealthy" || o.Address == "" {
					t.Errorf("backup origin %+v", o)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.names, ",") {
				t.Errorf("backup origins %v, want %v", names, tt.names)
			}
			if e.Level != tt.level {
				t.Errorf("level %d, want %d: the backup never changes the level", e.Level, tt.level)
			}
			for _, o := range e.Origins {
				for _, b := range e.Backup.Origins {
					if o.Name == b.Name {
						t.Errorf("origin %s is both current and backup", o.Name)
					}
				}
			}
		})
	}
	t.Run("a site of one level has none", func(t *testing.T) {
		f := fleet.New(cfg)
		if e := publish.Entry(f.Sites[0]); e.Backup != nil {
			t.Fatalf("site %s: backup %+v", e.Name, e.Backup)
		}
	})
}

// TestBuilderBackupChange: a change of the backup alone (its level, or an
// origin's state) is a new version, and an unchanged backup is none.
func TestBuilderBackupChange(t *testing.T) {
	cfg, diags := config.Parse("test.hcl", []byte(threeLevels))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	f := fleet.New(cfg)
	s := f.Sites[1]
	var b publish.Builder
	c := b.Prepare(f.Sites, nil, true, 0, "")
	snap := b.Apply(c, len(f.Sites), true)
	if bk := snap.Sites[1].Backup; bk == nil || bk.Level != 2 {
		t.Fatalf("first backup %+v", bk)
	}
	version, stored := c.Version, c.Digest()
	step := func(name string, change func(), wantNew bool, wantLevel int) {
		t.Helper()
		change()
		c := b.Prepare(f.Sites, []int{1}, false, version, stored)
		if c.Publish != wantNew {
			t.Fatalf("%s: publish %v, want %v", name, c.Publish, wantNew)
		}
		if !wantNew {
			return
		}
		if c.Version != version+1 || c.Digest() == stored {
			t.Fatalf("%s: version %d (digest %s), want %d and a new digest", name, c.Version, c.Digest(), version+1)
		}
		snap := b.Apply(c, len(f.Sites), false)
		if bk := snap.Sites[1].Backup; bk == nil || bk.Level != wantLevel {
			t.Fatalf("%s: backup %+v, want level %d", name, bk, wantLevel)
		}
		version, stored = c.Version, c.Digest()
	}
	step("nothing changed", func() {}, false, 0)
	step("b1 healthy: its state in the backup", func() { s.State.Origins[1].State = decide.Healthy }, true, 2)
	step("a1 (the current level) unchanged, c1 healthy: level 2 stays first", func() { s.State.Origins[3].State = decide.Healthy }, false, 0)
	step("level 2 unhealthy: the backup moves to 3", func() {
		s.State.Origins[1].State, s.State.Origins[2].State = decide.Unhealthy, decide.Unhealthy
	}, true, 3)
}

// TestEntryBackupDuringRamp: during a failback ramp the backup is the
// level left, where a failure of the recovering level sends the site back,
// and once the level left is unhealthy (the ramp ends) it is the usual
// search's.
func TestEntryBackupDuringRamp(t *testing.T) {
	cfg, diags := config.Parse("test.hcl", []byte(rampSite))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	f := fleet.NewRoundClock(cfg)
	s := f.Sites[0]
	round := func(a1, b1, b2 decide.Verdict) publication.Site {
		levels := make([]decide.Health, len(s.Spec.Levels))
		f.Seq++
		decide.RoundAt(s.Spec, s.State, []decide.Verdict{a1, b1, b2}, levels, nil, int64(f.Seq))
		return publish.Entry(s)
	}
	up, down := vote.VerdictUp, vote.VerdictDown
	if e := round(up, up, up); e.Backup == nil || e.Backup.Level != 2 || len(e.Backup.Origins) != 2 {
		t.Fatalf("level 1, level 2 healthy: backup %+v", e.Backup)
	}
	if e := round(down, up, down); e.Level != 2 || e.Backup != nil {
		t.Fatalf("after the failover to 2 (a1 unhealthy): level %d backup %+v, want 2 and none", e.Level, e.Backup)
	}
	e := round(up, up, down) // failback to 1 with a ramp from 2; b2 unhealthy
	if e.Ramp == nil || e.Backup == nil || e.Backup.Level != 2 || len(e.Backup.Origins) != 1 || e.Backup.Origins[0].Name != "b1" {
		t.Fatalf("ramp %+v backup %+v, want the level left, 2, with b1", e.Ramp, e.Backup)
	}
	if e := round(up, down, down); e.Ramp != nil || e.Backup != nil {
		t.Fatalf("level left unhealthy: ramp %+v backup %+v, want neither", e.Ramp, e.Backup)
	}
}
