package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vigilcdn/vigil/plugins/node/proxy"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// SnapshotFile is the name of the saved publication in the state directory.
const SnapshotFile = "publication.json"

// maxSnapshotFile bounds the saved publication read at start.
const maxSnapshotFile = 256 << 20

// SaveSnapshot writes snap to dir/publication.json atomically: a temporary
// file in dir, synced, then renamed over the old one, so that a crash leaves
// either the old or the new snapshot, never half of one.
func SaveSnapshot(dir string, snap *publication.Snapshot) error {
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("saving the publication: %w", err)
	}
	if err := writeAtomic(dir, SnapshotFile, b); err != nil {
		return fmt.Errorf("saving the publication: %w", err)
	}
	return nil
}

// writeAtomic writes b to dir/name atomically: a temporary file in dir,
// synced, then renamed over the old one.
func writeAtomic(dir, name string, b []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return fmt.Errorf("in %s: %w (check -state-dir exists and is writable)", dir, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op error
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// LoadSnapshot reads dir/publication.json. It returns (nil, nil) when there
// is none yet.
func LoadSnapshot(dir string) (*publication.Snapshot, error) {
	f, err := os.Open(filepath.Join(dir, SnapshotFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the saved publication: %w", err)
	}
	defer f.Close()
	snap, err := DecodeSnapshot(io.LimitReader(f, maxSnapshotFile))
	if err != nil {
		return nil, fmt.Errorf("reading the saved publication %s: %w (delete it to start without one; the control plane sends a fresh one)", f.Name(), err)
	}
	return snap, nil
}

// DecodeSnapshot parses and checks a saved publication.
func DecodeSnapshot(r io.Reader) (*publication.Snapshot, error) {
	var snap publication.Snapshot
	dec := json.NewDecoder(r)
	if err := dec.Decode(&snap); err != nil {
		return nil, fmt.Errorf("not a publication: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a publication: data after the JSON object")
	}
	if snap.Version == 0 {
		return nil, errors.New("publication version 0: versions start at 1")
	}
	seen := map[string]bool{}
	for i := range snap.Sites {
		s := &snap.Sites[i]
		s.Hostname = proxy.NormalizeHost(s.Hostname)
		if s.Hostname == "" || strings.ContainsAny(s.Hostname, ":/ \t\r\n[]") {
			return nil, fmt.Errorf("site %d (%q) has no usable hostname (%q)", i, s.Name, s.Hostname)
		}
		if seen[s.Hostname] {
			return nil, fmt.Errorf("hostname %q is published twice", s.Hostname)
		}
		seen[s.Hostname] = true
	}
	return &snap, nil
}

// HeldFile is the name of the held passive windows in the state directory
// (see passive.serve): a restarted node keeps the evidence that holds a
// failed origin down.
const HeldFile = "passive-held.json"

// maxHeldFile bounds the held windows read at start.
const maxHeldFile = 64 << 20

// heldWindow is one held window as HeldFile keeps it.
type heldWindow struct {
	Address string   `json:"address"`
	Hosts   []string `json:"hosts,omitempty"`
	// Asked says a gateway asked for the window (it is canaried).
	Asked bool `json:"asked,omitempty"`
	// Paths are the paths (no query) of failed GET and HEAD requests the
	// canaries ask for.
	Paths []string `json:"paths,omitempty"`
	// Attempts are the window's attempts, oldest first.
	Attempts []heldAttempt `json:"attempts"`
}

// heldAttempt is one attempt of a held window: when (unix nanoseconds),
// and its kind (kindNames).
type heldAttempt struct {
	At   int64  `json:"at"`
	Kind string `json:"kind"`
}

// kindNames name the kinds of attempt in HeldFile.
var kindNames = map[uint8]string{kindOK: "ok", kind5xx: "5xx", kindTimeout: "timeout", kindIgnored: "ignored", kindSlow: "slow"}

// saveHeld writes the held windows to dir/passive-held.json atomically.
func saveHeld(dir string, held []heldWindow) error {
	if held == nil {
		held = []heldWindow{}
	}
	b, err := json.Marshal(map[string]any{"held": held})
	if err != nil {
		return fmt.Errorf("saving the held passive windows: %w", err)
	}
	if err := writeAtomic(dir, HeldFile, b); err != nil {
		return fmt.Errorf("saving the held passive windows: %w", err)
	}
	return nil
}

// loadHeld reads dir/passive-held.json; none is no window.
func loadHeld(dir string) ([]heldWindow, error) {
	f, err := os.Open(filepath.Join(dir, HeldFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the held passive windows: %w", err)
	}
	defer f.Close()
	var page struct {
		Held []heldWindow `json:"held"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxHeldFile)).Decode(&page); err != nil {
		return nil, fmt.Errorf("reading the held passive windows %s: %w (delete it to start without them)", f.Name(), err)
	}
	return page.Held, nil
}
