package etcdstore_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
)

// The child of TestSplitCommitKilled: it commits the fleet's incident
// round and kills itself (SIGKILL) at the step named by the environment.
func init() {
	endpoint, prefix, step := os.Getenv("VIGIL_KILL_ETCD"), os.Getenv("VIGIL_KILL_PREFIX"), os.Getenv("VIGIL_KILL_STEP")
	if endpoint == "" {
		return
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		os.Exit(3)
	}
	s := newStore(cli, etcdstore.Options{Prefix: prefix, AfterTxn: func(got string) error {
		if got == step {
			self, _ := os.FindProcess(os.Getpid())
			_ = self.Kill()
			select {} // killed
		}
		return nil
	}})
	if err := s.Commit(context.Background(), fleetRound(2)); err != nil {
		os.Exit(4)
	}
	os.Exit(5) // the step never came
}

// TestSplitCommitKilled is TestSplitCommitCrash with a real process
// killed by SIGKILL between two transactions of its split commit: a new
// store then sees all of the round or none of it, with a journal without
// gaps or duplicates, and saves the next round after it.
func TestSplitCommitKilled(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	for _, tt := range []struct {
		step      string
		committed bool
	}{
		{"staged 3", false},
		{"marker", true},
		{"copied 2", true},
	} {
		t.Run(tt.step, func(t *testing.T) {
			prefix := "/killed-" + tt.step
			if err := newStore(cli, etcdstore.Options{Prefix: prefix}).Commit(ctx, fleetRound(1)); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run", "^$")
			cmd.Env = append(os.Environ(), "VIGIL_KILL_ETCD="+srv.Endpoint, "VIGIL_KILL_PREFIX="+prefix, "VIGIL_KILL_STEP="+tt.step)
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
				t.Fatalf("the child was not killed at %q: %v", tt.step, err)
			}
			next := newStore(cli, etcdstore.Options{Prefix: prefix})
			st, err := next.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.committed {
				checkFleet(t, next, st, 1)
				if err := next.Commit(ctx, fleetRound(2)); err != nil {
					t.Fatal(err)
				}
				if st, err = next.Load(ctx); err != nil {
					t.Fatal(err)
				}
			}
			checkFleet(t, next, st, 2)
		})
	}
}
