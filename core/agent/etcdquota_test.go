package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigilcdn/vigil/core/agent"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine/enginetest"
	"github.com/vigilcdn/vigil/core/notify"
	"github.com/vigilcdn/vigil/core/store/etcdstore/etcdtest"
	"github.com/vigilcdn/vigil/internal/testnet"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestEtcdQuotaPagesAlertmanager: a real etcd whose space quota is
// exhausted refuses every write ("database space exceeded") while the
// leader keeps its lease. The leader's switch is refused and an
// Alertmanager on loopback gets VigilStateNotSaved{reason="etcd_refused"};
// once the operator frees etcd (delete, compact, defragment, disarm), the
// next switch is saved and the alert resolved.
func TestEtcdQuotaPagesAlertmanager(t *testing.T) {
	etcdtest.Require(t)
	etcd := etcdtest.Start(t, "--quota-backend-bytes", fmt.Sprint(16<<20))
	am := newAlertmanager(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := testnet.Addr(t)
	src := fmt.Sprintf(`
control {
  round_interval = "1h"
  data_dir       = %q
  api {
    listen     = %q
    token_file = %q
  }
  store "etcd" {
    endpoints    = [%q]
    lease_ttl    = "5s"
    dial_timeout = "2s"
  }
}
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
notify "alertmanager" "am" {
  urls            = [%q]
  resend_interval = "2s"
}
`, dir, listen, tokenFile, etcd.Endpoint, am.URL)
	cfg, diags := config.Parse(filepath.Join(dir, "vigil.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	logs := &sdktest.LogBuffer{}
	a, err := agent.Start(cfg, agent.Options{
		Logger:    hclog.New(&hclog.LoggerOptions{Output: logs}),
		NewSource: enginetest.Sources{}.Factory(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })

	// The instance leads once it won the election: a switch is saved.
	level := 2
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := switchTo(t, listen, level); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never saved a switch to etcd:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Fill etcd to its quota: it raises its NOSPACE alarm and refuses
	// every write from then on.
	cli := etcd.Client(t)
	ctx := context.Background()
	big := strings.Repeat("x", 1<<20)
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("100 MiB put into an etcd with a 16 MiB quota: it never refused")
		}
		_, err := cli.Put(ctx, fmt.Sprintf("/filler/%d", i), big)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	level = 3 - level
	code, e := switchTo(t, listen, level)
	if code != 503 || e.Code != "not_saved" {
		t.Fatalf("a switch with etcd over its quota answered %d %+v; want 503 not_saved", code, e)
	}
	notSaved := am.await(t, "VigilStateNotSaved", notify.AlertStateNotSaved, firingNow)
	if notSaved.Labels["reason"] != notify.ReasonEtcdRefused || !strings.Contains(notSaved.Annotations["description"], "database space exceeded") {
		t.Errorf("VigilStateNotSaved: %+v", notSaved)
	}
	if got := metric(t, listen, `vigil_commit_failures_total{reason="etcd_refused"}`); got == "" || got == "0" {
		t.Errorf(`vigil_commit_failures_total{reason="etcd_refused"} = %q with etcd over its quota`, got)
	}

	// What an operator does: free the space, defragment, disarm.
	if _, err := cli.Delete(ctx, "/filler/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Defragment(ctx, etcd.Endpoint); err != nil {
		t.Fatal(err)
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range alarms.Alarms {
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: m.MemberID, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
			t.Fatal(err)
		}
	}
	if code, e := switchTo(t, listen, level); code != 200 {
		t.Fatalf("after etcd was freed, the switch answered %d %+v\n%s", code, e, logs)
	}
	am.await(t, "VigilStateNotSaved resolved", notify.AlertStateNotSaved, resolvedNow)
}
