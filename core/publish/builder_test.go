package publish_test

import (
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
