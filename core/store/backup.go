package store

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// records decodes and counts the records of vigil's buckets while
// verifyFile walks; with full, every record, else the meta record only.
type records struct {
	full                  bool
	hasMeta               bool
	meta                  Meta
	sites, events         int
	cursors, probed       int
	firstEvent, lastEvent uint64
	warnings              []string
}

func (r *records) visit(bucket string, k, v []byte) error {
	switch bucket {
	case string(bucketMeta):
		if string(k) == string(keyMeta) {
			if err := json.Unmarshal(v, &r.meta); err != nil {
				return fmt.Errorf("does not decode (%v)", err)
			}
			r.hasMeta = true
		}
	case string(bucketSites):
		r.sites++
		if r.full {
			var s Site
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("does not decode (%v)", err)
			}
		}
	case string(bucketEvents):
		r.events++
		if len(k) != 8 {
			return fmt.Errorf("has a key of %d bytes, not 8", len(k))
		}
		seq := binary.BigEndian.Uint64(k)
		if r.firstEvent == 0 {
			r.firstEvent = seq
		}
		r.lastEvent = seq
		if r.full {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("does not decode (%v)", err)
			}
			if e.Seq != seq {
				return fmt.Errorf("holds event %d", e.Seq)
			}
		}
	case string(bucketCursors):
		r.cursors++
		if r.full && len(v) != 8 {
			return fmt.Errorf("is %d bytes, not 8", len(v))
		}
	case string(bucketProbed):
		r.probed++
		if r.full && len(v) != 16 {
			return fmt.Errorf("is %d bytes, not 16", len(v))
		}
	}
	return nil
}

// complete checks what the walk saw as a whole: a file with counters
// has the buckets of sites and events.
func (r *records) complete(fr *fileReport) error {
	if !r.hasMeta {
		return nil
	}
	for _, b := range [][]byte{bucketSites, bucketEvents} {
		if _, ok := fr.buckets[string(b)]; !ok {
			return damagef("it has counters (round %d) but no %q bucket", r.meta.Round, b)
		}
	}
	if r.full && r.events > 0 && r.lastEvent != r.meta.LastEvent {
		r.warnings = append(r.warnings, fmt.Sprintf("the journal's newest event is %d but the counters say %d", r.lastEvent, r.meta.LastEvent))
	}
	return nil
}

// checkFile runs the full check of a bbolt file that no writer uses: the
// structural check (precheck), then bbolt's own (tx.Check) on a read-only
// open.
func checkFile(path string, lock, decode bool, timeout time.Duration) (*fileReport, *records, error) {
	fr, rc, err := precheck(path, lock, decode, timeout)
	if err != nil {
		return nil, nil, err
	}
	if err := boltCheckFile(path, timeout); err != nil {
		return nil, nil, err
	}
	return fr, rc, nil
}

// boltCheckFile opens a verified file read-only with bbolt and runs its
// check.
func boltCheckFile(path string, timeout time.Duration) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damagef("reading it faulted (%v)", r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(boltCheck)
}

// BackupReport says what Backup wrote.
type BackupReport struct {
	// Path is the new last-good copy (vigil.db.good); Previous is where
	// the one before went (vigil.db.good.1), "" when there was none.
	Path, Previous string
	Size           int64
	// ReadTx is how long the copy held its read transaction; Took is the
	// whole backup, with the fsync and the check of the copy.
	ReadTx, Took time.Duration
}

func (s *Bolt) backupLoop(interval time.Duration) {
	defer s.loop.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	backup := func() {
		rep, err := s.Backup(ctx)
		if ctx.Err() != nil {
			return // stopping: Close writes the last copy
		}
		if s.onBackup != nil {
			s.onBackup(rep, err)
		}
	}
	backup()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			backup()
		}
	}
}

// Backup writes the last-good copy: a consistent copy of the state taken
// in one read transaction (commits go on meanwhile) into a temporary file
// in the data directory, synced, then checked like `vigil state check`
// does; only a copy that passes replaces vigil.db.good, the one before
// becoming vigil.db.good.1. A copy that fails is removed and reported: a
// last-good copy is never replaced by a bad one.
func (s *Bolt) Backup(ctx context.Context) (rep *BackupReport, err error) {
	s.backupMu.Lock()
	defer s.backupMu.Unlock()
	began := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.reserve && s.ReserveInUse() {
		// The room the reserve left is the state file's: a copy there
		// would stop the commits within hours (TestFullDiskReserveWithBackups).
		return nil, fmt.Errorf("store: last-good copy of %s not written: data_dir is full and the state file writes into its space reserve, whose room a copy would take; copies resume once the reserve is written again", s.path)
	}
	good := filepath.Join(s.dir, GoodFileName)
	tmp, err := os.CreateTemp(s.dir, tempPrefix+"good-*")
	if err != nil {
		return nil, fmt.Errorf("store: last-good copy: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("store: last-good copy of %s not written: %w", s.path, err)
		}
	}()
	rep = &BackupReport{Path: good}
	w := bufio.NewWriterSize(ctxWriter{ctx, tmp}, 1<<20)
	err = func() (err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer s.guard(&err)
		return s.db.View(func(tx *bolt.Tx) error {
			t0 := time.Now()
			defer func() { rep.ReadTx = time.Since(t0) }()
			n, err := tx.WriteTo(w)
			rep.Size = n
			if err != nil {
				return err
			}
			return w.Flush()
		})
	}()
	if err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if _, _, err := checkFile(tmp.Name(), false, false, time.Second); err != nil {
		return nil, fmt.Errorf("the copy fails its check: %w", err)
	}
	if _, err := os.Lstat(good); err == nil {
		prev := filepath.Join(s.dir, PreviousGoodFileName)
		if err := os.Rename(good, prev); err != nil {
			return nil, err
		}
		rep.Previous = prev
	}
	if err := os.Rename(tmp.Name(), good); err != nil {
		return nil, err
	}
	if err := syncDir(s.dir); err != nil {
		return nil, err
	}
	rep.Took = time.Since(began)
	return rep, nil
}

// ctxWriter stops a copy when its context ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// CheckReport is what Check found in a sound state file.
type CheckReport struct {
	// Path is the state file.
	Path     string
	Size     int64
	PageSize int
	// Pages is bbolt's high-water mark; InUse and Free split it.
	Pages       uint64
	InUse, Free int
	// Meta holds the counters: last round, last event, publication.
	Meta Meta
	// Sites, Events (in the journal, FirstEvent to LastEvent), Cursors
	// and Probes count the records; each one was decoded.
	Sites, Events         int
	FirstEvent, LastEvent uint64
	Cursors, Probes       int
	// Good and PreviousGood are the last-good copies, nil when absent;
	// GoodProblem says what is wrong with Good ("" when it passes).
	Good, PreviousGood *Copy
	GoodProblem        string
	// Warnings are oddities that are not damage.
	Warnings []string
	Took     time.Duration
}

// Check runs the full check of the state in dir without changing
// anything, as `vigil state check` does. It works while no agent runs;
// while one does it fails with ErrInUse. A damaged, empty or lost state
// gives a *DamagedError or *MissingError, a data directory that never
// held state an error wrapping ErrNoState.
func Check(dir string) (*CheckReport, error) {
	began := time.Now()
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if ev := evidence(dir); ev != "" {
			return nil, &MissingError{Path: path, DataDir: dir, Evidence: ev, Good: lastGood(dir)}
		}
		return nil, fmt.Errorf("%s holds no %s and no sign of earlier state: no agent has kept state in this data_dir yet (is -data-dir right?): %w", dir, FileName, ErrNoState)
	}
	fr, rc, err := checkFile(path, true, true, time.Second)
	if err != nil {
		if errors.Is(err, errLocked) {
			return nil, inUseError(path)
		}
		return nil, stateError(path, dir, err)
	}
	rep := &CheckReport{
		Path: path, Size: fr.size, PageSize: fr.pageSize, Pages: fr.pages, InUse: fr.inUse, Free: fr.free,
		Meta: rc.meta, Sites: rc.sites, Events: rc.events, FirstEvent: rc.firstEvent, LastEvent: rc.lastEvent,
		Cursors: rc.cursors, Probes: rc.probed,
		Good:         statCopy(filepath.Join(dir, GoodFileName)),
		PreviousGood: statCopy(filepath.Join(dir, PreviousGoodFileName)),
		Warnings:     append(fr.warnings, rc.warnings...),
	}
	if rep.Good != nil {
		if _, err := verifyFile(rep.Good.Path, nil); err != nil {
			rep.GoodProblem = err.Error()
		}
	}
	rep.Took = time.Since(began)
	return rep, nil
}

// RestoreReport says what Restore did.
type RestoreReport struct {
	// Path is the restored state file; From the copy it came from.
	Path string
	From Copy
	// Sites and Meta describe the restored state.
	Sites int
	Meta  Meta
	// MovedAside is where the previous state file went ("" when there was
	// none); Previous says what was wrong with it ("" when it passed the
	// structural check).
	MovedAside, Previous string
	// Skipped lists the copies that failed their check, with why.
	Skipped []string
}

// Restore puts a good copy in place of the state file in dir: from, or
// else the last-good copy (vigil.db.good, then vigil.db.good.1), after it
// passes the full check. The current state file is moved aside as
// vigil.db.damaged-TIMESTAMP (never deleted), the copy is written to a
// temporary file, synced and renamed in. It refuses while an agent holds
// the state file (ErrInUse) and when no copy passes (ErrNoGoodCopy).
func Restore(dir, from string) (*RestoreReport, error) {
	path := filepath.Join(dir, FileName)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		f, err := os.Open(path)
		if err != nil {
			return nil, accessError(path, err)
		}
		defer f.Close()
		if err := lockFile(f, true, time.Second); err != nil {
			if errors.Is(err, errLocked) {
				return nil, fmt.Errorf("restore refused: %w", inUseError(path))
			}
			return nil, fmt.Errorf("store: locking %s: %w", path, err)
		}
		defer unlockFile(f)
	}
	candidates := []string{from}
	if from == "" {
		candidates = nil
		for _, name := range []string{GoodFileName, PreviousGoodFileName} {
			if c := filepath.Join(dir, name); statCopy(c) != nil {
				candidates = append(candidates, c)
			}
		}
		if len(candidates) == 0 {
			return nil, fmt.Errorf("%s holds no last-good copy (%s or %s); restore a copy of your own with -from FILE, or start the agent with -fresh-state to begin with an empty state: %w",
				dir, GoodFileName, PreviousGoodFileName, ErrNoGoodCopy)
		}
	} else if a, b := statCopy(from), statCopy(path); a != nil && b != nil {
		sa, _ := os.Stat(from)
		sb, _ := os.Stat(path)
		if os.SameFile(sa, sb) {
			return nil, fmt.Errorf("-from %s is the state file itself; name a copy", from)
		}
	}
	rep := &RestoreReport{Path: path}
	var src string
	for _, c := range candidates {
		fr, rc, err := checkFile(c, false, true, time.Second)
		if err != nil {
			if !errors.As(err, new(*damage)) && !errors.Is(err, errEmptyFile) {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", c, err))
			} else {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s is damaged (%v)", c, err))
			}
			continue
		}
		_ = fr
		src, rep.Sites, rep.Meta = c, rc.sites, rc.meta
		rep.From = *statCopy(c)
		break
	}
	if src == "" {
		return rep, fmt.Errorf("no copy passes the check: %s; restore a copy of your own with -from FILE, or start the agent with -fresh-state to begin with an empty state: %w",
			joinSemi(rep.Skipped), ErrNoGoodCopy)
	}
	tmp, err := copyToTemp(src, dir)
	if err != nil {
		return rep, fmt.Errorf("store: copying %s into %s: %w", src, dir, err)
	}
	if _, err := verifyFile(tmp, nil); err != nil {
		os.Remove(tmp)
		return rep, fmt.Errorf("store: the copy of %s in %s fails its check (is the disk full or failing?): %w", src, dir, err)
	}
	if _, err := os.Lstat(path); err == nil {
		if _, err := verifyFile(path, nil); err != nil {
			rep.Previous = err.Error()
		}
		to, err := moveAside(path, damagedSuffix, time.Now())
		if err != nil {
			os.Remove(tmp)
			return rep, fmt.Errorf("store: %w", err)
		}
		rep.MovedAside = to
	}
	if err := os.Rename(tmp, path); err != nil {
		return rep, fmt.Errorf("store: putting the copy in place: %w (the copy is %s)", err, tmp)
	}
	if err := syncDir(dir); err != nil {
		return rep, fmt.Errorf("store: %w", err)
	}
	if err := writeMarker(dir, time.Now()); err != nil {
		return rep, err
	}
	return rep, nil
}

func joinSemi(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

// copyToTemp copies src into a synced temporary file in dir.
func copyToTemp(src, dir string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, tempPrefix+"restore-*")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(out.Name())
		return "", err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		os.Remove(out.Name())
		return "", err
	}
	if err := out.Close(); err != nil {
		os.Remove(out.Name())
		return "", err
	}
	if err := os.Chmod(out.Name(), 0o600); err != nil {
		os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
}
