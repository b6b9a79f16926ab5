package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The files of the embedded store in the data directory.
const (
	// GoodFileName is the last-good copy of FileName: written by Backup
	// after it passed the check.
	GoodFileName = FileName + ".good"
	// PreviousGoodFileName is the last-good copy before GoodFileName.
	PreviousGoodFileName = FileName + ".good.1"
	// MarkerFileName is written beside FileName once it has been opened:
	// with it, a missing FileName is a loss, not a first start.
	MarkerFileName = FileName + ".marker"

	damagedSuffix = ".damaged"
	keptSuffix    = ".kept"
	tempPrefix    = "." + FileName + ".tmp-"
)

var errLocked = errors.New("locked")

// timestamp names a file moved aside: UTC, sortable, no colons.
func timestamp(t time.Time) string { return t.UTC().Format("20060102T150405Z") }

// moveAside renames path to path+suffix+"-"+timestamp (never over an
// existing file) and returns the new name.
func moveAside(path, suffix string, now time.Time) (string, error) {
	base := path + suffix + "-" + timestamp(now)
	to := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
			break
		}
		to = base + "-" + strconv.Itoa(i)
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("moving %s aside: %w", path, err)
	}
	return to, nil
}

// syncDir makes renames and creations in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// statCopy describes the file at path, nil when it is not a regular file.
func statCopy(path string) *Copy {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return &Copy{Path: path, Time: st.ModTime(), Size: st.Size()}
}

// lastGood is the newest last-good copy in dir, nil when there is none.
func lastGood(dir string) *Copy {
	if c := statCopy(filepath.Join(dir, GoodFileName)); c != nil {
		return c
	}
	return statCopy(filepath.Join(dir, PreviousGoodFileName))
}

// evidence says why dir is known to have held state, "" when nothing
// says so (a first start).
func evidence(dir string) string {
	if c := statCopy(filepath.Join(dir, MarkerFileName)); c != nil {
		return fmt.Sprintf("%s says state was kept here since %s", c.Path, c.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if c := lastGood(dir); c != nil {
		return fmt.Sprintf("a last-good copy (%s) exists", c.Path)
	}
	return ""
}

// writeMarker writes the marker file once.
func writeMarker(dir string, now time.Time) error {
	path := filepath.Join(dir, MarkerFileName)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	text := fmt.Sprintf("vigil keeps its state in %s in this folder since %s.\n"+
		"Do not delete this file: while it is here, a missing or empty %s is refused\n"+
		"as a loss instead of being taken for a first start (see docs/state.md).\n",
		FileName, now.UTC().Format(time.RFC3339), FileName)
	if err := writeFileSync(path, []byte(text)); err != nil {
		return fmt.Errorf("store: writing the marker %s: %w", path, err)
	}
	return syncDir(dir)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// removeTemps removes the temporary files an interrupted backup or
// restore left (never a state file or a copy).
func removeTemps(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}
