package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

var (
	bucketMeta    = []byte("meta")
	bucketSites   = []byte("sites")
	bucketEvents  = []byte("events")
	bucketCursors = []byte("cursors")
	bucketProbed  = []byte("probed")
	keyMeta       = []byte("meta")
)

// FileName is the bbolt file inside the data directory.
const FileName = "vigil.db"

// DefaultBackupInterval is how often the store writes its last-good copy
// when OpenOptions.BackupInterval is 0.
const DefaultBackupInterval = 10 * time.Minute

// defaultLockTimeout is how long Open waits for the file's lock.
const defaultLockTimeout = 2 * time.Second

// Bolt is the embedded store: one bbolt file.
type Bolt struct {
	db          *bolt.DB
	journalSize uint64
	dir, path   string
	report      OpenReport

	auto     bool // automatic last-good copies
	onBackup func(*BackupReport, error)
	backupMu sync.Mutex // one copy at a time
	stop     chan struct{}
	loop     sync.WaitGroup
	stopOnce sync.Once

	// The space reserve (reserve.go), when OpenOptions.Reserve is set.
	// reserveMu serializes the writes with the reserve's own.
	reserve      bool
	onReserve    func(ReserveEvent)
	reserveMu    sync.Mutex
	reserveHeld  bool      // the reserve file is written
	reserveUsed  bool      // it was deleted for a commit and not written again yet
	reserveSize  int64     // its size
	reserveTried time.Time // the last try to write it (or its release)
}

// OpenOptions configure OpenWith.
type OpenOptions struct {
	// JournalSize bounds the event journal (DefaultJournalSize when <= 0).
	JournalSize int
	// Fresh allows starting with an empty state when the state file is
	// damaged, empty (0 bytes), or missing although state existed before.
	// The old file is moved aside as vigil.db.damaged-TIMESTAMP and the
	// last-good copies as vigil.db.good*.kept-TIMESTAMP, never deleted;
	// OpenReport lists the moves. Fresh changes nothing when the state
	// file is sound: it permits an empty start, it does not ask for one.
	Fresh bool
	// BackupInterval is how often the store writes its last-good copy
	// (DefaultBackupInterval when 0). The store also writes one right
	// after opening and one at Close. Negative turns the automatic copies
	// off; Backup still works.
	BackupInterval time.Duration
	// OnBackup, when set, is called after each automatic copy with its
	// report or its error, for the caller to log; the store logs nothing.
	// It is called from the store's own goroutine and from Close.
	OnBackup func(*BackupReport, error)
	// LockTimeout is how long opening waits while another process holds
	// the file (2 s when 0); then it fails with ErrInUse.
	LockTimeout time.Duration
	// NoBoltCheck leaves out bbolt's own consistency check (tx.Check) at
	// open, which runs after the structural check that always runs. It
	// saves about 25 ms at 100,000 sites.
	NoBoltCheck bool
	// Reserve keeps a space reserve in dir (ReserveFileName): when a
	// write fails because the filesystem is full, the store deletes it and
	// writes again into the room it leaves, so that rounds and actions go
	// on being saved (and published) for a long while on a full disk. It
	// writes the reserve again, at most once a minute, once there is room.
	Reserve bool
	// OnReserve, when set, is told when the reserve is used, written
	// again, or cannot be written; the store logs nothing.
	OnReserve func(ReserveEvent)
}

// Move is a file moved aside.
type Move struct {
	From, To string
}

// OpenReport says what OpenWith found and did, for the caller to log.
type OpenReport struct {
	// Path is the state file.
	Path string
	// Created is true on a first start: no state file and no sign that
	// one existed.
	Created bool
	// Fresh is true when OpenOptions.Fresh was used: the state was
	// damaged, empty or missing and the store started empty; Moved says
	// where the old files went and Problem what was wrong.
	Fresh   bool
	Problem string
	Moved   []Move
	// Size, Pages and PageSize describe the file as it was checked (0 for
	// a new file).
	Size     int64
	Pages    uint64
	PageSize int
	// Sites and Events count the records found by the check.
	Sites, Events int
	// Warnings are oddities the check found and bbolt copes with, such as
	// one invalid header page.
	Warnings []string
	// Check is how long the open check took, Took the whole open.
	Check, Took time.Duration
}

// Open opens (creating if needed) the bbolt store in dir. journalSize
// bounds the event journal (DefaultJournalSize when <= 0). It is OpenWith
// without automatic last-good copies.
func Open(dir string, journalSize int) (*Bolt, error) {
	return OpenWith(dir, OpenOptions{JournalSize: journalSize, BackupInterval: -1})
}

// OpenWith opens (creating on a first start) the bbolt store in dir. It
// checks the file before using it and never panics on a damaged one:
//
//   - a corrupt or cut-short file gives a *DamagedError (ErrDamaged);
//   - a 0-byte file, or a missing one while the marker file or a last-good
//     copy says state existed, gives a *MissingError (ErrStateMissing);
//   - a file held by another process gives an error wrapping ErrInUse.
//
// With opts.Fresh the first two start empty instead, moving the old files
// aside (see OpenOptions.Fresh and Report).
func OpenWith(dir string, opts OpenOptions) (*Bolt, error) {
	began := time.Now()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("store: creating data_dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = defaultLockTimeout
	}
	rep := OpenReport{Path: path}
	// refused handles a damaged, empty or lost state file.
	refused := func(cause error, problem string) error {
		if !opts.Fresh {
			return cause
		}
		now := time.Now()
		if _, err := os.Lstat(path); err == nil {
			to, err := moveAside(path, damagedSuffix, now)
			if err != nil {
				return fmt.Errorf("store: -fresh-state: %w", err)
			}
			rep.Moved = append(rep.Moved, Move{From: path, To: to})
		}
		for _, name := range []string{GoodFileName, PreviousGoodFileName} {
			good := filepath.Join(dir, name)
			if _, err := os.Lstat(good); err != nil {
				continue
			}
			to, err := moveAside(good, keptSuffix, now)
			if err != nil {
				return fmt.Errorf("store: -fresh-state: %w", err)
			}
			rep.Moved = append(rep.Moved, Move{From: good, To: to})
		}
		rep.Fresh, rep.Problem = true, problem
		return syncDir(dir)
	}
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if ev := evidence(dir); ev != "" {
			cause := &MissingError{Path: path, DataDir: dir, Evidence: ev, Good: lastGood(dir)}
			if err := refused(cause, "it was missing although "+ev); err != nil {
				return nil, err
			}
		} else {
			rep.Created = true
		}
	case err != nil:
		return nil, accessError(path, err)
	default:
		t0 := time.Now()
		fr, rc, err := precheck(path, true, false, timeout)
		rep.Check = time.Since(t0)
		switch {
		case err == nil:
			rep.Size, rep.Pages, rep.PageSize, rep.Warnings = fr.size, fr.pages, fr.pageSize, fr.warnings
			rep.Sites, rep.Events = rc.sites, rc.events
		case errors.Is(err, errLocked):
			return nil, inUseError(path)
		default:
			cause := stateError(path, dir, err)
			if _, ok := cause.(*accessErr); ok {
				return nil, cause
			}
			if err := refused(cause, err.Error()); err != nil {
				return nil, err
			}
		}
	}

	if opts.JournalSize <= 0 {
		opts.JournalSize = DefaultJournalSize
	}
	db, err := openChecked(path, timeout, !opts.NoBoltCheck && !rep.Created && !rep.Fresh, &rep)
	if err != nil {
		return nil, stateError(path, dir, err)
	}
	if err := writeMarker(dir, time.Now()); err != nil {
		db.Close()
		return nil, err
	}
	removeTemps(dir)
	rep.Took = time.Since(began)
	s := &Bolt{db: db, journalSize: uint64(opts.JournalSize), dir: dir, path: path, report: rep,
		onBackup: opts.OnBackup, stop: make(chan struct{}), reserve: opts.Reserve, onReserve: opts.OnReserve}
	if s.reserve {
		s.reserveMu.Lock()
		s.ensureReserve(time.Now())
		s.reserveMu.Unlock()
	}
	if opts.BackupInterval >= 0 {
		interval := opts.BackupInterval
		if interval == 0 {
			interval = DefaultBackupInterval
		}
		s.auto = true
		s.loop.Add(1)
		go s.backupLoop(interval)
	}
	return s, nil
}

// Report says what opening found and did.
func (s *Bolt) Report() OpenReport { return s.report }

// precheck checks the file at path with plain reads, never through a
// memory map: its structure, and its records (every one decoded when decode
// is set, else the meta record only). lock says to take a shared lock
// first, so that a running agent is reported as such (errLocked) and not as
// damage.
func precheck(path string, lock, decode bool, timeout time.Duration) (*fileReport, *records, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if lock {
		if err := lockFile(f, false, timeout); err != nil {
			return nil, nil, err
		}
		defer unlockFile(f)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.IsDir() {
		return nil, nil, damagef("it is a directory, not a file")
	}
	rc := &records{full: decode}
	fr, err := verifyReader(f, st.Size(), rc.visit)
	if err != nil {
		return nil, nil, err
	}
	if err := rc.complete(fr); err != nil {
		return nil, nil, err
	}
	return fr, rc, nil
}

// stateError turns what checking or opening path found into the error
// for the operator: *DamagedError, *MissingError, or an access error.
func stateError(path, dir string, err error) error {
	var d *damage
	switch {
	case errors.Is(err, errEmptyFile):
		return &MissingError{Path: path, Empty: true, DataDir: dir, Evidence: evidence(dir), Good: lastGood(dir)}
	case errors.As(err, &d):
		return &DamagedError{Path: path, Problem: err.Error(), DataDir: dir, Good: lastGood(dir)}
	case errors.Is(err, bolterrors.ErrTimeout):
		return inUseError(path)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrVersionMismatch),
		errors.Is(err, bolterrors.ErrIncompatibleValue):
		return &DamagedError{Path: path, Problem: "bbolt refused it: " + err.Error(), DataDir: dir, Good: lastGood(dir), Err: err}
	}
	return &accessErr{accessError(path, err)}
}

// accessErr is an error of the system (permissions, I/O), not of the
// file's content: -fresh-state does not apply.
type accessErr struct{ error }

func (e *accessErr) Unwrap() error { return e.error }

// openChecked opens the checked file with bbolt and prepares the buckets,
// turning a fault or panic of bbolt into damage.
func openChecked(path string, timeout time.Duration, full bool, rep *OpenReport) (db *bolt.DB, err error) {
	var file *os.File
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			// bbolt's mapping is lost with the panic; release at least the
			// file and its lock.
			if file != nil {
				file.Close()
			}
			db, err = nil, damagef("reading it faulted (%v)", r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		if file == nil {
			file = f
		}
		return f, err
	}})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketSites, bucketEvents, bucketCursors, bucketProbed} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && full {
		t0 := time.Now()
		err = db.View(func(tx *bolt.Tx) error { return boltCheck(tx) })
		rep.Check += time.Since(t0)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// boltCheck runs bbolt's consistency check. It must only run on a file
// that passed verifyFile: bbolt checks in a goroutine of its own, where a
// fault could not be recovered.
func boltCheck(tx *bolt.Tx) error {
	var errs []error
	for err := range tx.Check() {
		if len(errs) < 5 {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return &damage{problem: "bbolt's check: " + errors.Join(errs...).Error()}
	}
	return nil
}

// guard turns a memory fault or a panic of bbolt while reading into an
// error: the file changed under the running store (cut short, say).
// Other panics are not the file's doing and go on.
func (s *Bolt) guard(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if _, fault := r.(interface{ Addr() uintptr }); !fault && !strings.HasPrefix(fmt.Sprint(r), "assertion failed") {
		panic(r)
	}
	*err = &DamagedError{Path: s.path, Problem: fmt.Sprintf("reading it failed (%v): it changed while the agent ran", r), DataDir: s.dir, Good: lastGood(s.dir)}
}

// damaged reports a record that does not decode.
func (s *Bolt) damaged(err error) error {
	return &DamagedError{Path: s.path, Problem: err.Error(), DataDir: s.dir, Good: lastGood(s.dir), Err: err}
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// Load reads everything.
func (s *Bolt) Load(_ context.Context) (st *State, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	st = &State{Sites: map[string]Site{}, Cursors: map[string]uint64{}}
	var bad error // a record that does not decode: damage
	err = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta).Get(keyMeta); b != nil {
			if err := json.Unmarshal(b, &st.Meta); err != nil {
				bad = fmt.Errorf("the meta record does not decode (%w)", err)
				return bad
			}
		}
		if err := decodeSites(tx.Bucket(bucketSites), st.Sites); err != nil {
			bad = err
			return bad
		}
		if err := tx.Bucket(bucketProbed).ForEach(func(k, v []byte) error {
			site, ok := st.Sites[string(k)]
			if !ok || len(v) != 16 {
				return nil
			}
			if r := binary.BigEndian.Uint64(v); r > site.LastProbed {
				site.LastProbed = r
				site.LastProbedAt = time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))).UTC()
				st.Sites[string(k)] = site
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketCursors).ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				st.Cursors[string(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	})
	if bad != nil {
		return nil, s.damaged(bad)
	}
	if err != nil {
		return nil, fmt.Errorf("store: loading %s: %w", s.path, err)
	}
	return st, nil
}

// Commit writes a batch in one bbolt transaction.
func (s *Bolt) Commit(_ context.Context, b Batch) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	err = s.update(func(tx *bolt.Tx) error {
		meta, err := json.Marshal(b.Meta)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(keyMeta, meta); err != nil {
			return err
		}
		sites := tx.Bucket(bucketSites)
		for _, site := range b.Sites {
			v, err := json.Marshal(site)
			if err != nil {
				return fmt.Errorf("site %s: %w", site.Name, err)
			}
			if err := sites.Put([]byte(site.Name), v); err != nil {
				return err
			}
		}
		probed := tx.Bucket(bucketProbed)
		for _, p := range b.Probed {
			var v [16]byte
			binary.BigEndian.PutUint64(v[:], p.Round)
			binary.BigEndian.PutUint64(v[8:], uint64(p.At.UnixNano()))
			if err := probed.Put([]byte(p.Site), v[:]); err != nil {
				return err
			}
		}
		for _, name := range b.Deleted {
			if err := sites.Delete([]byte(name)); err != nil {
				return err
			}
			if err := probed.Delete([]byte(name)); err != nil {
				return err
			}
		}
		events := tx.Bucket(bucketEvents)
		for _, e := range b.Events {
			if b.Meta.LastEvent > s.journalSize && e.Seq <= b.Meta.LastEvent-s.journalSize {
				continue // dropped by the bound below at once: not worth writing
			}
			v, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("event %d: %w", e.Seq, err)
			}
			if err := events.Put(seqKey(e.Seq), v); err != nil {
				return err
			}
		}
		// Keep the journal bounded: drop events older than the newest
		// journalSize.
		if b.Meta.LastEvent > s.journalSize {
			cutoff := b.Meta.LastEvent - s.journalSize
			c := events.Cursor()
			for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= cutoff; k, _ = c.Next() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: committing round %d: %w", b.Meta.Round, err)
	}
	return nil
}

// update runs fn in a write transaction. When it fails because the
// filesystem is full and the store holds its space reserve, the reserve
// is deleted and fn runs again; after a write that succeeds, a reserve
// that was used is written again when it is time to try.
func (s *Bolt) update(fn func(*bolt.Tx) error) error {
	if !s.reserve {
		return s.db.Update(fn)
	}
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	err := s.db.Update(fn)
	now := time.Now()
	if err != nil && isNoSpace(err) && s.releaseReserve(now) {
		err = s.db.Update(fn)
	}
	if err == nil {
		s.ensureReserve(now)
	}
	return err
}

// Events reads the journal.
func (s *Bolt) Events(_ context.Context, after uint64, site string, limit int) (out []Event, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	if limit <= 0 {
		limit = 100
	}
	var bad error
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil || len(k) != 8 {
				bad = fmt.Errorf("the journal event %x does not decode (%v)", k, err)
				return bad
			}
			if site == "" || e.Site == site {
				out = append(out, e)
			}
		}
		return nil
	})
	if bad != nil {
		return nil, s.damaged(bad)
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading events: %w", err)
	}
	return out, nil
}

// SetCursor records a notifier's delivery cursor.
func (s *Bolt) SetCursor(_ context.Context, notifier string, seq uint64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	err = s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).Put([]byte(notifier), seqKey(seq))
	})
	if err != nil {
		return fmt.Errorf("store: saving the delivery cursor of %s: %w", notifier, err)
	}
	return nil
}

// Close closes the bbolt file (bbolt syncs every commit). With automatic
// copies on, it first stops them and writes a last copy, reported to
// OpenOptions.OnBackup.
func (s *Bolt) Close() error {
	first := false
	s.stopOnce.Do(func() {
		first = true
		close(s.stop)
	})
	s.loop.Wait()
	if first && s.auto {
		rep, err := s.Backup(context.Background())
		if s.onBackup != nil {
			s.onBackup(rep, err)
		}
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: closing: %w", err)
	}
	return nil
}

// decodeSites decodes every site record of b into sites, on every core: at
// 100,000 sites the JSON takes a second on one.
func decodeSites(b *bolt.Bucket, sites map[string]Site) error {
	type rec struct{ k, v []byte }
	var recs []rec
	if err := b.ForEach(func(k, v []byte) error {
		recs = append(recs, rec{k, v})
		return nil
	}); err != nil {
		return err
	}
	out := make([]Site, len(recs))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(recs)/1000))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(recs); i += workers {
				if err := json.Unmarshal(recs[i].v, &out[i]); err != nil {
					errs[w] = fmt.Errorf("the site record %q does not decode (%w)", recs[i].k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for i, r := range recs {
		sites[string(r.k)] = out[i]
	}
	return nil
}

// Cursors reads the counters and the notifiers' delivery cursors, without
// the sites.
func (s *Bolt) Cursors(_ context.Context) (meta Meta, cursors map[string]uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(&err)
	cursors = map[string]uint64{}
	err = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta).Get(keyMeta); b != nil {
			if err := json.Unmarshal(b, &meta); err != nil {
				return fmt.Errorf("the meta record does not decode (%w)", err)
			}
		}
		return tx.Bucket(bucketCursors).ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				cursors[string(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	})
	if err != nil {
		return Meta{}, nil, fmt.Errorf("store: reading the counters of %s: %w", s.db.Path(), err)
	}
	return meta, cursors, nil
}
