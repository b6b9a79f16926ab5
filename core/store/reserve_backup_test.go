package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/store"
)

// TestFullDiskReserveWithBackups is TestFullDiskReserve as the agent runs
// the store: with the last-good copy written every backupEvery rounds
// (every 10 minutes at a 10 s round_interval). A copy needs room of its
// own and holds a read transaction while it is written, so it competes
// with the commits for the room the reserve left: written there, the
// copies stopped the commits after 1,460 rounds (about four hours at a
// 10 s round_interval). So the store writes no copy while the reserve is
// in use; every round of the run is then saved, and the copies resume
// once the reserve is written again.
func TestFullDiskReserveWithBackups(t *testing.T) {
	const (
		maxRounds   = 15000
		backupEvery = 60
	)
	disk := smallDisk(t, "16m")
	s, err := store.OpenWith(disk, store.OpenOptions{BackupInterval: -1, Reserve: true})
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
	if _, err := s.Backup(ctx); err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, disk)
	n, written, refused := 0, 0, 0
	var failed error
	for ; n < maxRounds; n++ {
		if n%backupEvery == 0 {
			if _, err := s.Backup(ctx); err != nil {
				refused++
			} else {
				written++
			}
		}
		if failed = s.Commit(ctx, incident(uint64(101+n), last, n)); failed != nil {
			break
		}
		last += 4
	}
	fi, _ := os.Stat(filepath.Join(disk, store.FileName))
	t.Logf("failover rounds saved on a full disk with a last-good copy every %d rounds: %d of %d (then: %v); copies written %d, refused %d; state file %d bytes",
		backupEvery, n, maxRounds, failed, written, refused, fi.Size())
	if failed != nil {
		t.Fatalf("round %d on a full disk was not saved: %v", n+1, failed)
	}
	if !s.ReserveInUse() {
		t.Fatal("the run never needed the reserve: the test did not fill the disk")
	}
	if _, err := s.Backup(ctx); err == nil || !strings.Contains(err.Error(), "space reserve") {
		t.Fatalf("a last-good copy while the reserve is in use: %v; want it refused, naming the reserve", err)
	}

	// Room again: the reserve is written again, and so are the copies.
	store.SetReserveRetry(t, 0)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, incident(uint64(101+n), last, n)); err != nil {
		t.Fatal(err)
	}
	if s.ReserveInUse() {
		t.Fatal("the reserve was not written again once there was room")
	}
	if _, err := s.Backup(ctx); err != nil {
		t.Fatalf("the last-good copy once the reserve is back: %v", err)
	}
}
