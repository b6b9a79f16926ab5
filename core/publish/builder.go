package publish

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// DigestPrefix marks the digest format in the stored meta.
const DigestPrefix = "x1:"

// Entry is site s as published: its current level and that level's
// enabled origins, with their states, its failback ramp in progress and
// its backup level.
func Entry(s *fleet.Site) publication.Site {
	ps := publication.Site{Name: s.Spec.Name, Hostname: s.Config.Hostname, Level: s.State.Level}
	n := 0
	for i, o := range s.Spec.Origins {
		if o.Level == s.State.Level && s.State.Origins[i].State != decide.Disabled {
			n++
		}
	}
	ps.Origins = make([]publication.Origin, 0, n)
	for i, o := range s.Spec.Origins {
		st := s.State.Origins[i].State
		if o.Level != s.State.Level || st == decide.Disabled {
			continue
		}
		ps.Origins = append(ps.Origins, publication.Origin{Name: o.Name, Address: s.Config.Origins[i].Address, State: st.String()})
	}
	ps.Ramp = rampOf(s)
	ps.Backup = backupOf(s)
	return ps
}

// backupOf is the level the site would fail over to next, were its
// current level to fail now, as decide.RoundAt chooses it (the failover
// rule of docs/decisions.md): during a failback ramp the level left, when
// it is not unhealthy; otherwise, of the levels after the current one in
// ascending order and then those before it, the first healthy one, else
// the first unknown. Its origins are its enabled ones that are not
// unhealthy. None when no such level exists (a site of one level, or every
// other level unhealthy).
func backupOf(s *fleet.Site) *publication.Backup {
	spec, st := s.Spec, s.State
	cur := spec.LevelIndex(st.Level)
	if len(spec.Levels) < 2 || cur < 0 {
		return nil
	}
	levels := make([]decide.Health, len(spec.Levels))
	decide.LevelHealth(spec, st, levels)
	target := -1
	if r, ok := decide.RampOf(spec, st); ok {
		if fi := spec.LevelIndex(r.From); fi >= 0 && levels[fi] != decide.Unhealthy {
			target = fi
		}
	}
	if target < 0 {
		target = failoverSearch(levels, cur, decide.Healthy)
	}
	if target < 0 {
		target = failoverSearch(levels, cur, decide.Unknown)
	}
	if target < 0 {
		return nil
	}
	b := &publication.Backup{Level: spec.Levels[target]}
	for i, o := range spec.Origins {
		h := st.Origins[i].State
		if o.LevelIndex != target || h == decide.Disabled || h == decide.Unhealthy {
			continue
		}
		b.Origins = append(b.Origins, publication.Origin{Name: o.Name, Address: s.Config.Origins[i].Address, State: h.String()})
	}
	if len(b.Origins) == 0 { // a level that is not unhealthy has one; be safe
		return nil
	}
	return b
}

// failoverSearch is the failover order of docs/decisions.md over the
// levels' health: the levels after cur ascending, then those before cur
// ascending; the index of the first of health want, or -1.
func failoverSearch(levels []decide.Health, cur int, want decide.Health) int {
	n := len(levels)
	for k := 1; k < n; k++ {
		if i := (cur + k) % n; levels[i] == want {
			return i
		}
	}
	return -1
}

func sameOrigins(a, b []publication.Origin) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rampOf is the site's failback ramp in progress as published
// (docs/antiflap.md#failback-ramp): the current level's weight, the level
// left and its enabled origins that are not unhealthy. None when the site
// has no ramp in progress, or when the level left has no such origin any
// more (an operator disabled them since the last round): all traffic is
// then on the current level, as the next round will decide too.
func rampOf(s *fleet.Site) *publication.Ramp {
	r, ok := decide.RampOf(s.Spec, s.State)
	if !ok {
		return nil
	}
	var from []publication.Origin
	for i, o := range s.Spec.Origins {
		st := s.State.Origins[i].State
		if o.Level != r.From || st == decide.Disabled || st == decide.Unhealthy {
			continue
		}
		from = append(from, publication.Origin{Name: o.Name, Address: s.Config.Origins[i].Address, State: st.String()})
	}
	if len(from) == 0 {
		return nil
	}
	return &publication.Ramp{Weight: r.Weight, From: r.From, FromOrigins: from}
}

func sameEntry(a, b *publication.Site) bool {
	if a.Name != b.Name || a.Hostname != b.Hostname || a.Level != b.Level || !sameOrigins(a.Origins, b.Origins) {
		return false
	}
	if (a.Ramp == nil) != (b.Ramp == nil) {
		return false
	}
	if a.Ramp != nil {
		if a.Ramp.Weight != b.Ramp.Weight || a.Ramp.From != b.Ramp.From || !sameOrigins(a.Ramp.FromOrigins, b.Ramp.FromOrigins) {
			return false
		}
	}
	if (a.Backup == nil) != (b.Backup == nil) {
		return false
	}
	return a.Backup == nil || (a.Backup.Level == b.Backup.Level && sameOrigins(a.Backup.Origins, b.Backup.Origins))
}

// entrySum fingerprints one entry; the digest is the XOR of them all, so
// that one site's change costs one hash.
func entrySum(p *publication.Site) [16]byte {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(p.Name)
	field(p.Hostname)
	binary.BigEndian.PutUint64(n[:], uint64(p.Level))
	h.Write(n[:])
	for _, o := range p.Origins {
		field(o.Name)
		field(o.Address)
		field(o.State)
	}
	// An entry without a ramp sums as before the ramp existed, so that
	// the stored digest of such a publication keeps its version.
	if r := p.Ramp; r != nil {
		field("ramp")
		binary.BigEndian.PutUint64(n[:], uint64(r.Weight))
		h.Write(n[:])
		binary.BigEndian.PutUint64(n[:], uint64(r.From))
		h.Write(n[:])
		for _, o := range r.FromOrigins {
			field(o.Name)
			field(o.Address)
			field(o.State)
		}
	}
	// Likewise an entry without a backup.
	if bk := p.Backup; bk != nil {
		field("backup")
		binary.BigEndian.PutUint64(n[:], uint64(bk.Level))
		h.Write(n[:])
		for _, o := range bk.Origins {
			field(o.Name)
			field(o.Address)
			field(o.State)
		}
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

func xor(a *[16]byte, b [16]byte) {
	for i := range a {
		a[i] ^= b[i]
	}
}

// Builder is the publication as the control plane builds it: one entry
// per site of the fleet, by fleet index, each entry's fingerprint and the
// digest of them all. It works out what a commit changes (Prepare) and
// takes the change in once the commit is saved (Apply), so that nothing
// leaves before it is stored. Its methods are called under the engine's
// lock.
type Builder struct {
	entries []publication.Site
	sums    [][16]byte
	digest  [16]byte
	// started is set once this process has published (or decided what
	// version its content carries).
	started bool
	// ramps counts the entries that carry a Ramp: while any does, the
	// snapshot's Format is publication.FormatRamp.
	ramps int
}

// Change is a publication prepared for a commit: the new entries of the
// changed sites, the digest and version they make, and whether a new
// snapshot goes to the hub after the commit. The caller may set Version
// and Publish (a standby mirrors the stored version).
type Change struct {
	idx     []int
	entries []publication.Site
	sums    [][16]byte
	digest  [16]byte
	Version uint64
	Publish bool
}

// Digest is the change's digest as the meta stores it.
func (c *Change) Digest() string { return DigestPrefix + hex.EncodeToString(c.digest[:]) }

// Restart makes the next Prepare decide the version anew, as the first
// publication of a process does (after the state was reloaded from the
// store).
func (b *Builder) Restart() { b.started = false }

// Prepare works out what the publication becomes with the sites' current
// state, without touching b: every entry when all is set (or the fleet's
// size changed), else the changed sites'. version and storedDigest are the
// committed version and digest: the first publication of a process keeps
// the stored version when its content is the one stored (nodes holding it
// are not woken for nothing), and any other content gets a new version.
func (b *Builder) Prepare(sites []*fleet.Site, changed []int, all bool, version uint64, storedDigest string) Change {
	n := len(sites)
	c := Change{digest: b.digest, Version: version}
	differs := false
	if all || len(b.entries) != n {
		var d [16]byte
		c.idx = make([]int, n)
		c.entries = make([]publication.Site, n)
		c.sums = make([][16]byte, n)
		for i, s := range sites {
			c.idx[i] = i
			c.entries[i] = Entry(s)
			c.sums[i] = entrySum(&c.entries[i])
			xor(&d, c.sums[i])
		}
		c.digest = d
		differs = d != b.digest || len(b.entries) != n
	} else {
		for _, i := range changed {
			ent := Entry(sites[i])
			if sameEntry(&ent, &b.entries[i]) {
				continue
			}
			sum := entrySum(&ent)
			xor(&c.digest, b.sums[i])
			xor(&c.digest, sum)
			c.idx = append(c.idx, i)
			c.entries = append(c.entries, ent)
			c.sums = append(c.sums, sum)
			differs = true
		}
	}
	switch {
	case !b.started:
		if version == 0 || c.Digest() != storedDigest {
			c.Version++
		}
		c.Publish = true
	case differs:
		c.Version++
		c.Publish = true
	}
	return c
}

// Apply takes a committed change in, for a fleet of n sites (all: every
// entry was rebuilt), and returns the snapshot to publish, or nil when the
// change publishes nothing new.
func (b *Builder) Apply(c Change, n int, all bool) *publication.Snapshot {
	if len(b.sums) != n || all {
		b.sums = make([][16]byte, n)
	}
	if len(c.idx) > 0 {
		// The entries are shared with the published snapshot, which readers
		// hold: a change makes a new slice rather than writing into it.
		entries := make([]publication.Site, n)
		if len(b.entries) == n && !all {
			copy(entries, b.entries)
		}
		for k, i := range c.idx {
			entries[i], b.sums[i] = c.entries[k], c.sums[k]
		}
		b.entries = entries
		// The copy above is as long: counting costs no more.
		b.ramps = 0
		for i := range entries {
			if entries[i].Ramp != nil {
				b.ramps++
			}
		}
	}
	b.digest = c.digest
	b.started = true
	if !c.Publish {
		return nil
	}
	snap := &publication.Snapshot{Version: c.Version, Sites: b.entries}
	if b.ramps > 0 {
		snap.Format = publication.FormatRamp
	}
	return snap
}
