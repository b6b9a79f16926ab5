package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sentinels that the typed errors below unwrap to, for errors.Is.
var (
	// ErrDamaged: the state file is corrupt or cut short (*DamagedError).
	ErrDamaged = errors.New("state file is damaged")
	// ErrStateMissing: the state file is empty or gone although state
	// existed before (*MissingError).
	ErrStateMissing = errors.New("state file is missing")
	// ErrInUse: another process (a running agent) holds the state file.
	ErrInUse = errors.New("state file is in use by a running agent")
	// ErrNoState: the data directory holds no state at all and never did
	// (a first start); returned by Check, never by Open.
	ErrNoState = errors.New("no state in the data directory")
	// ErrNoGoodCopy: Restore found no copy that passes the check.
	ErrNoGoodCopy = errors.New("no good copy to restore")
)

// Copy describes a copy of the state file: the last-good copy, or a
// file moved aside.
type Copy struct {
	Path string
	// Time is when the copy was written (its modification time).
	Time time.Time
	Size int64
}

// DamagedError says that the state file is corrupt or cut short. Open
// returns it before using the file; Load returns it for a record that does
// not decode. It unwraps to ErrDamaged (and to Err when set).
type DamagedError struct {
	// Path is the damaged file.
	Path string
	// Problem is what is wrong, for people ("it was cut short").
	Problem string
	// DataDir is the data directory, as the operator gave it.
	DataDir string
	// Good is the newest last-good copy, nil when there is none.
	Good *Copy
	// Err is the underlying error, if any.
	Err error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("%s is damaged (%s); %s", e.Path, e.Problem, wayOut(e.DataDir, e.Good, true))
}

// Unwrap gives ErrDamaged and the underlying error.
func (e *DamagedError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrDamaged, e.Err}
	}
	return []error{ErrDamaged}
}

// MissingError says that the state file is empty (0 bytes) or missing
// although state existed before: the marker file or a last-good copy is in
// the data directory. It unwraps to ErrStateMissing.
type MissingError struct {
	// Path is the state file.
	Path string
	// Empty is true for a 0-byte file, false for a missing one.
	Empty bool
	// DataDir is the data directory, as the operator gave it.
	DataDir string
	// Evidence says why state is known to have existed ("" for an empty
	// file: an empty file is never a valid state).
	Evidence string
	// Good is the newest last-good copy, nil when there is none.
	Good *Copy
}

func (e *MissingError) Error() string {
	what := "is missing"
	if e.Empty {
		what = "is empty (0 bytes)"
	}
	why := ""
	if e.Evidence != "" {
		why = " although " + e.Evidence
	}
	return fmt.Sprintf("%s %s%s: starting would forget every manual hold and level; %s", e.Path, what, why, wayOut(e.DataDir, e.Good, e.Empty))
}

// Unwrap gives ErrStateMissing.
func (e *MissingError) Unwrap() error { return ErrStateMissing }

// wayOut tells the operator how to go on.
func wayOut(dir string, good *Copy, fileExists bool) string {
	kept := ""
	if fileExists {
		kept = fmt.Sprintf(" (the file is moved aside as %s-TIMESTAMP, never deleted)", FileName+damagedSuffix)
	}
	if good != nil {
		return fmt.Sprintf("restore the last good copy (%s, written %s) with `vigil state restore -data-dir %s`, or start the agent with -fresh-state to begin with an empty state%s",
			good.Path, ageString(good.Time), shellQuote(dir), kept)
	}
	return fmt.Sprintf("there is no last-good copy in %s; restore a copy of your own with `vigil state restore -data-dir %s -from FILE`, or start the agent with -fresh-state to begin with an empty state%s",
		dir, shellQuote(dir), kept)
}

// ageString prints a time and how long ago it was.
func ageString(t time.Time) string {
	age := time.Since(t).Round(time.Second)
	if age < 0 {
		age = 0
	}
	return fmt.Sprintf("%s, %s ago", t.UTC().Format("2006-01-02 15:04:05 UTC"), age)
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func inUseError(path string) error {
	return fmt.Errorf("store: %s is locked: it is in use by a running agent (another vigil agent is using this data_dir); stop it or set a different control { data_dir }: %w", path, ErrInUse)
}

// accessError explains a file the agent may not read or write.
func accessError(path string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("store: cannot read %s: %w; give the user running vigil read and write access to it and to %s (chown or chmod)", path, err, filepath.Dir(path))
	}
	return fmt.Errorf("store: cannot use %s: %w", path, err)
}
