package notify_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store/etcdstore"
)

// TestCommitFailureReason: a failed commit is classed by the kind of its
// error, however deeply wrapped, and never by its words.
func TestCommitFailureReason(t *testing.T) {
	t.Parallel()
	full := &os.PathError{Op: "write", Path: "/var/lib/vigil/vigil.db", Err: syscall.ENOSPC}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no space left", fmt.Errorf("store: round 7 not saved: %w", full), notify.ReasonDiskFull},
		{"quota", fmt.Errorf("store: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}), notify.ReasonDiskFull},
		{"fenced", fmt.Errorf("store: round 7 not saved: %w", etcdstore.ErrFenced), notify.ReasonFenced},
		{"etcd too many ops", fmt.Errorf("store: saving round 7 to etcd: %w", rpctypes.ErrTooManyOps), notify.ReasonEtcdRefused},
		{"etcd no space", fmt.Errorf("store: saving round 7 to etcd: %w", rpctypes.ErrNoSpace), notify.ReasonEtcdRefused},
		{"grpc unavailable", fmt.Errorf("store: %w", status.Error(codes.Unavailable, "connection refused")), notify.ReasonEtcdRefused},
		{"words of a full disk are not enough", errors.New("no space left on device"), notify.ReasonOther},
		{"words of the fence are not enough", errors.New(etcdstore.ErrFenced.Error()), notify.ReasonOther},
		{"timeout", fmt.Errorf("store: %w", os.ErrDeadlineExceeded), notify.ReasonOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notify.CommitFailureReason(tc.err); got != tc.want {
				t.Fatalf("CommitFailureReason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// controlMetric reads vigil_commit_failures_total{reason}.
func controlMetric(t *testing.T, c *notify.Control, reason string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if mf.GetName() == "vigil_commit_failures_total" && lp.GetName() == "reason" && lp.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no vigil_commit_failures_total{reason=%q}", reason)
	return 0
}

// until waits for POSTs to am until cond holds.
func (am *fakeAM) until(t *testing.T, what string, cond func(now time.Time) bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond(time.Now()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, wait)
		}
		am.waitPost(t)
	}
}

// TestControlAlerts: a failed commit pages through Alertmanager at once,
// with the reason class and the error scrubbed of secrets, is posted
// again at every resend interval while commits fail, and is resolved by
// the first commit that succeeds; the log says so once at each end, not
// once a commit. The space reserve's alert fires and resolves likewise,
// and a fenced commit ends the condition rather than paging.
func TestControlAlerts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "state"), 0)
	t.Cleanup(func() { st.Close() })
	am := newFakeAM(t)
	logs, logger := newLog()
	ctl := notify.NewControl(notify.ControlOptions{Instance: "cp-1", DataDir: "/var/lib/vigil", Logger: logger})
	n := &config.Notifier{Kind: config.NotifierAlertmanager, Name: "am", URLs: []string{am.URL + "/am-path-secret"},
		Installation: "test-eu", ResendInterval: 100 * time.Millisecond, Timeout: wait,
		Headers: map[string]string{"Authorization": "Bearer am-secret-token"}}
	d, err := notify.New(st, []*config.Notifier{n}, logger, notify.WithControl(ctl))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)

	const key = notify.AlertStateNotSaved + "//"
	full := fmt.Errorf("store: round 7 not saved: posting to http://admin:hunter22@10.0.0.1:2379/v3/kv?token=s3cr3t (via %s/am-path-secret, Bearer am-secret-token): %w",
		am.URL, &os.PathError{Op: "write", Path: "/var/lib/vigil/vigil.db", Err: syscall.ENOSPC})
	ctl.CommitFailed(full)
	am.until(t, "VigilStateNotSaved firing", func(now time.Time) bool { _, ok := am.firing(key, now); return ok })
	a, _ := am.get(key)
	for k, want := range map[string]string{"reason": notify.ReasonDiskFull, "instance": "cp-1", "vigil": "test-eu", "severity": "critical"} {
		if a.Labels[k] != want {
			t.Errorf("label %s = %q, want %q (labels %v)", k, a.Labels[k], want, a.Labels)
		}
	}
	desc := a.Annotations["description"]
	t.Logf("VigilStateNotSaved: %s", desc)
	for _, secret := range []string{"hunter22", "s3cr3t", "admin", "am-path-secret", "am-secret-token", "/v3/kv"} {
		if strings.Contains(desc, secret) {
			t.Errorf("the description shows %q: %s", secret, desc)
		}
	}
	if !strings.Contains(desc, "http://10.0.0.1:2379") || !strings.Contains(desc, "no space left on device") || !strings.Contains(desc, "(1 so far)") {
		t.Errorf("the description does not say what failed: %s", desc)
	}
	if a.Annotations["command"] != "df -h /var/lib/vigil" {
		t.Errorf("command %q", a.Annotations["command"])
	}

	// Commits go on failing: the alert is posted again at each interval,
	// with the same start, and counts them; the log said it once.
	started := a.StartsAt
	ctl.CommitFailed(full)
	ctl.CommitFailed(full)
	am.until(t, "the count of failed commits updated", func(now time.Time) bool {
		a, ok := am.firing(key, now)
		return ok && strings.Contains(a.Annotations["description"], "(3 so far)")
	})
	ends := a.EndsAt
	am.until(t, "VigilStateNotSaved posted again", func(now time.Time) bool {
		a, ok := am.firing(key, now)
		return ok && a.EndsAt.After(ends)
	})
	if a, _ := am.get(key); !a.StartsAt.Equal(started) {
		t.Errorf("startsAt moved from %v to %v", started, a.StartsAt)
	}
	if got := controlMetric(t, ctl, notify.ReasonDiskFull); got != 3 {
		t.Errorf("vigil_commit_failures_total{reason=disk_full} = %v, want 3", got)
	}
	if n := strings.Count(logs.String(), "the state cannot be saved"); n != 1 {
		t.Errorf("the log says the state cannot be saved %d times, want once:\n%s", n, logs)
	}
	for _, secret := range []string{"hunter22", "s3cr3t"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log shows %q", secret)
		}
	}

	// A commit succeeds: resolved, and the log says so.
	ctl.CommitSaved()
	am.until(t, "VigilStateNotSaved resolved", func(now time.Time) bool {
		a, ok := am.get(key)
		return ok && !a.EndsAt.After(now)
	})
	if !strings.Contains(logs.String(), "the state is saved again") {
		t.Errorf("the log does not say the state is saved again:\n%s", logs)
	}

	// The store writes into its space reserve, then writes it again.
	const rkey = notify.AlertStoreOnReserve + "//"
	ctl.ReserveReleased(8 << 20)
	am.until(t, "VigilStoreOnReserve firing", func(now time.Time) bool { _, ok := am.firing(rkey, now); return ok })
	if a, _ := am.get(rkey); a.Labels["severity"] != "warning" || !strings.Contains(a.Annotations["description"], "8 MiB") {
		t.Errorf("VigilStoreOnReserve: %+v", a)
	}
	ctl.ReserveRestored()
	am.until(t, "VigilStoreOnReserve resolved", func(now time.Time) bool {
		a, ok := am.get(rkey)
		return ok && !a.EndsAt.After(now)
	})

	// etcd refuses: it pages with its reason; a fenced commit (the role
	// went to another instance) ends the condition and pages nothing.
	ctl.CommitFailed(fmt.Errorf("store: saving round 9 to etcd: %w", rpctypes.ErrTooManyOps))
	am.until(t, "VigilStateNotSaved firing for etcd", func(now time.Time) bool {
		a, ok := am.firing(key, now)
		return ok && a.Labels["reason"] == notify.ReasonEtcdRefused
	})
	ctl.CommitFailed(fmt.Errorf("store: round 9 not saved: %w", etcdstore.ErrFenced))
	am.until(t, "VigilStateNotSaved resolved by the fence", func(now time.Time) bool {
		a, ok := am.get(key)
		return ok && a.Labels["reason"] == notify.ReasonEtcdRefused && !a.EndsAt.After(now)
	})
	if got := controlMetric(t, ctl, notify.ReasonFenced); got != 1 {
		t.Errorf("vigil_commit_failures_total{reason=fenced} = %v, want 1", got)
	}
}
