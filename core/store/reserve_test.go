package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// smallDisk mounts a tmpfs of size for the test, or skips (unless CI is
// set and the test runs as root) where the platform does not allow it.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" && os.Geteuid() == 0 {
			t.Fatalf("cannot mount a size-limited tmpfs as root in CI: %v: %s", err, out)
		}
		t.Skipf("no size-limited filesystem here (mount tmpfs: %v: %s); the full-disk test needs root", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk writes to dir until the filesystem is full, and returns the
// file it wrote.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// What a 64 KiB write could not take, smaller ones can.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// incident is one failover of site i: its record on level 2 and four
// events (three origins down, the switch), as a round makes.
func incident(round uint64, lastEvent uint64, i int) store.Batch {
	name := fmt.Sprintf("site%03d", i%100)
	b := store.Batch{Meta: store.Meta{Round: round, LastEvent: lastEvent + 4, Publication: round},
		Sites: []store.Site{{Name: name, Level: 2, Origins: map[string]store.Origin{
			"a1": {State: "unhealthy", Failures: 3, Reason: "direct: connect: connection refused"},
			"a2": {State: "unhealthy", Failures: 3, Reason: "direct: connect: connection refused"},
			"a3": {State: "unhealthy", Failures: 3, Reason: "direct: connect: connection refused"}}}}}
	for j, o := range []string{"a1", "a2", "a3"} {
		b.Events = append(b.Events, store.Event{Seq: lastEvent + uint64(j) + 1, Site: name, Round: round,
			Event: decide.Event{Kind: decide.KindOriginState, Origin: o, From: decide.Healthy, To: decide.Unhealthy}})
	}
	b.Events = append(b.Events, store.Event{Seq: lastEvent + 4, Site: name, Round: round,
		Event: decide.Event{Kind: decide.KindLevelSwitched, FromLevel: 1, ToLevel: 2, Reason: decide.ReasonFailover}})
	return b
}

// TestFullDiskReserve fills the filesystem of data_dir and then commits
// failover rounds until one fails (at most maxRounds). Without a reserve
// the state file stops taking them soon; with one (Reserve) the store
// deletes it at the first commit that finds no room, says so
// (OnReserve), and goes on: the journal reaches its bound and the file
// stops growing, so every round of the run is saved. Once the filler is
// deleted, the reserve is written again.
func TestFullDiskReserve(t *testing.T) {
	const maxRounds = 15000 // past the journal's bound of 10,000 events
	saved := map[bool]int{}
	for _, reserve := range []bool{false, true} {
		t.Run(fmt.Sprintf("reserve %v", reserve), func(t *testing.T) {
			disk := smallDisk(t, "16m")
			var mu sync.Mutex
			var said []store.ReserveEvent
			s, err := store.OpenWith(disk, store.OpenOptions{BackupInterval: -1, Reserve: reserve, OnReserve: func(e store.ReserveEvent) {
				mu.Lock()
				defer mu.Unlock()
				said = append(said, e)
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			ctx := context.Background()
			var last uint64
			for i := range 100 {
				if err := s.Commit(ctx, incident(uint64(i+1), last, i)); err != nil {
					t.Fatal(err)
				}
				last += 4
			}
			_, err = os.Stat(filepath.Join(disk, store.ReserveFileName))
			if held := err == nil; held != reserve {
				t.Fatalf("reserve file there: %v, want %v", held, reserve)
			}
			filler := fillDisk(t, disk)
			n := 0
			var failed error
			for ; n < maxRounds; n++ {
				if failed = s.Commit(ctx, incident(uint64(101+n), last, n)); failed != nil {
					break
				}
				last += 4
			}
			saved[reserve] = n
			t.Logf("failover rounds saved on a full disk: %d of %d (then: %v)", n, maxRounds, failed)
			mu.Lock()
			events := append([]store.ReserveEvent(nil), said...)
			mu.Unlock()
			if !reserve {
				if failed == nil || !strings.Contains(failed.Error(), "no space left") {
					t.Fatalf("without a reserve, %d rounds were saved on a full disk (last error %v): the test did not fill the disk", n, failed)
				}
				return
			}
			if failed != nil {
				t.Fatalf("with the reserve, round %d on a full disk was not saved: %v", n+1, failed)
			}
			released := 0
			for _, e := range events {
				if e.Released {
					released++
				}
			}
			if released != 1 {
				t.Fatalf("OnReserve said %+v; want the reserve released once", events)
			}
			st, err := s.Load(ctx)
			if err != nil || st.Meta.LastEvent != last {
				t.Fatalf("after the run: last event %d (%v), want %d", st.Meta.LastEvent, err, last)
			}
			if fi, err := os.Stat(filepath.Join(disk, store.FileName)); err == nil {
				t.Logf("the state file: %d bytes (apparent size)", fi.Size())
			}
			// Room again: the next commit writes the reserve again (at
			// once here, a minute later in the agent).
			store.SetReserveRetry(t, 0)
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, incident(uint64(101+n), last, n)); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(disk, store.ReserveFileName)); err != nil {
				t.Fatalf("the reserve was not written again once there was room: %v", err)
			}
		})
	}
	if saved[true] <= saved[false] {
		t.Fatalf("rounds saved on a full disk: %d with the reserve, %d without", saved[true], saved[false])
	}
}
