package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Bolt is the embedded store: one bbolt file.
type Bolt struct {
	db          *bolt.DB
	journalSize uint64
}

// Open opens (creating if needed) the bbolt store in dir. journalSize
// bounds the event journal (DefaultJournalSize when <= 0).
func Open(dir string, journalSize int) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("store: creating data_dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("store: %s is locked: another vigil agent is using this data_dir; stop it or set a different control { data_dir }", path)
		}
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketSites, bucketEvents, bucketCursors, bucketProbed} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: preparing %s: %w", path, err)
	}
	if journalSize <= 0 {
		journalSize = DefaultJournalSize
	}
	return &Bolt{db: db, journalSize: uint64(journalSize)}, nil
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// Load reads everything.
func (s *Bolt) Load(_ context.Context) (*State, error) {
	st := &State{Sites: map[string]Site{}, Cursors: map[string]uint64{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta).Get(keyMeta); b != nil {
			if err := json.Unmarshal(b, &st.Meta); err != nil {
				return fmt.Errorf("meta record: %w", err)
			}
		}
		if err := tx.Bucket(bucketSites).ForEach(func(k, v []byte) error {
			var site Site
			if err := json.Unmarshal(v, &site); err != nil {
				return fmt.Errorf("site record %q: %w", k, err)
			}
			st.Sites[string(k)] = site
			return nil
		}); err != nil {
			return err
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
	if err != nil {
		return nil, fmt.Errorf("store: loading %s: %w", s.db.Path(), err)
	}
	return st, nil
}

// Commit writes a batch in one bbolt transaction.
func (s *Bolt) Commit(_ context.Context, b Batch) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
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

// Events reads the journal.
func (s *Bolt) Events(_ context.Context, after uint64, site string, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []Event
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if site == "" || e.Site == site {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading events: %w", err)
	}
	return out, nil
}

// SetCursor records a notifier's delivery cursor.
func (s *Bolt) SetCursor(_ context.Context, notifier string, seq uint64) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).Put([]byte(notifier), seqKey(seq))
	})
	if err != nil {
		return fmt.Errorf("store: saving the delivery cursor of %s: %w", notifier, err)
	}
	return nil
}

// Close closes the bbolt file (bbolt syncs every commit).
func (s *Bolt) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: closing: %w", err)
	}
	return nil
}
