package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// TestAlertmanagerInhibitions runs a real Alertmanager (Debian's
// prometheus-alertmanager) on loopback with the shipped example, posts
// the alerts of a few incidents, as Prometheus and the agent would send
// them, and reads back through its API which are inhibited and by what.
func TestAlertmanagerInhibitions(t *testing.T) {
	need(t, "prometheus-alertmanager")
	addr := testnet.Addr(t)
	cmd := exec.Command("prometheus-alertmanager", "--config.file="+alertmanagerFile,
		"--storage.path="+t.TempDir(), "--web.listen-address="+addr, "--cluster.listen-address=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("alertmanager output:\n%s", out.String())
		}
	})
	base := "http://" + addr
	eventually(t, "Alertmanager to be ready", func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// Each alert: its labels; want is the alertnames that inhibit it
	// (none: it stays active).
	type alert struct {
		labels map[string]string
		want   []string
	}
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	alerts := []alert{
		// prod's agent cannot save: its own alert speaks, the Prometheus
		// twin and the reserve warnings are inhibited.
		{l("alertname", "VigilStateNotSaved", "vigil", "prod", "instance", "cp-a", "severity", "critical", "reason", "disk_full"), nil},
		{l("alertname", "VigilStateNotSavedMetric", "vigil", "prod", "instance", "cp-a:8470", "job", "vigil", "severity", "critical"), []string{"VigilStateNotSaved"}},
		{l("alertname", "VigilStoreOnReserve", "vigil", "prod", "instance", "cp-a", "severity", "warning"), []string{"VigilStateNotSaved", "VigilStateNotSavedMetric"}},
		// staging's agent could not reach Alertmanager: its twin stays.
		{l("alertname", "VigilStateNotSavedMetric", "vigil", "staging", "instance", "cp-s:8470", "job", "vigil", "severity", "critical"), nil},
		// cp-b is not scraped: its other alerts are inhibited.
		{l("alertname", "VigilDown", "vigil", "prod", "instance", "cp-b:8470", "job", "vigil", "severity", "critical"), nil},
		{l("alertname", "VigilRoundsLate", "vigil", "prod", "instance", "cp-b:8470", "job", "vigil", "severity", "warning"), []string{"VigilDown"}},
		// www has nowhere to go: its origin alerts are part of it; shop's
		// are not.
		{l("alertname", "VigilAllLevelsUnhealthy", "vigil", "prod", "site", "www", "level", "1", "severity", "critical"), nil},
		{l("alertname", "VigilOriginUnhealthy", "vigil", "prod", "site", "www", "origin", "a1", "level", "1", "severity", "warning"), []string{"VigilAllLevelsUnhealthy"}},
		{l("alertname", "VigilOriginUnhealthy", "vigil", "prod", "site", "shop", "origin", "a1", "level", "1", "severity", "warning"), nil},
		// shop is on level 2: the agent's alert covers the rule's.
		{l("alertname", "VigilSiteOnBackupLevel", "vigil", "prod", "site", "shop", "level", "2", "severity", "warning"), nil},
		{l("alertname", "VigilSiteNotOnPrimary", "vigil", "prod", "site", "shop", "instance", "cp-a:8470", "job", "vigil", "severity", "warning"), []string{"VigilSiteOnBackupLevel"}},
		// A node down hides its other alerts.
		{l("alertname", "VigilNodeDown", "vigil", "prod", "instance", "edge-1:9471", "job", "vigil-node", "severity", "warning"), nil},
		{l("alertname", "VigilNodeOffline", "vigil", "prod", "instance", "edge-1:9471", "job", "vigil-node", "severity", "warning"), []string{"VigilNodeDown"}},
		{l("alertname", "VigilNodeOffline", "vigil", "prod", "instance", "edge-2:9471", "job", "vigil-node", "severity", "warning"), nil},
	}
	type postable struct {
		Labels   map[string]string `json:"labels"`
		StartsAt time.Time         `json:"startsAt"`
		EndsAt   time.Time         `json:"endsAt"`
	}
	var post []postable
	now := time.Now()
	for _, a := range alerts {
		post = append(post, postable{Labels: a.labels, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)})
	}
	body, _ := json.Marshal(post)
	resp, err := http.Post(base+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/v2/alerts: %s", resp.Status)
	}

	// The inhibitor learns of the alerts in the background: read until
	// every alert is there and each expected inhibition shows (a hang
	// guard only), then compare all of them.
	key := func(m map[string]string) string {
		var kv []string
		for k, v := range m {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		return strings.Join(kv, ",")
	}
	byFP := map[string]string{}  // fingerprint: alertname
	got := map[string][]string{} // alert key: alertnames inhibiting it
	eventually(t, "every alert listed with its inhibitions", func() bool {
		resp, err := http.Get(base + "/api/v2/alerts")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list []struct {
			Labels      map[string]string `json:"labels"`
			Fingerprint string            `json:"fingerprint"`
			Status      struct {
				InhibitedBy []string `json:"inhibitedBy"`
			} `json:"status"`
		}
		if json.NewDecoder(resp.Body).Decode(&list) != nil || len(list) != len(alerts) {
			return false
		}
		clear(byFP)
		clear(got)
		for _, a := range list {
			byFP[a.Fingerprint] = a.Labels["alertname"]
		}
		for _, a := range list {
			var names []string
			for _, fp := range a.Status.InhibitedBy {
				names = append(names, byFP[fp])
			}
			slices.Sort(names)
			got[key(a.Labels)] = names
		}
		for _, a := range alerts {
			if len(got[key(a.labels)]) < min(len(a.want), 1) {
				return false
			}
		}
		return true
	})
	for _, a := range alerts {
		name := fmt.Sprintf("%s %s%s", a.labels["alertname"], a.labels["instance"], a.labels["site"])
		t.Run(name, func(t *testing.T) {
			g := got[key(a.labels)]
			// One inhibiting alert is enough; all of them must be expected.
			for _, by := range g {
				if !slices.Contains(a.want, by) {
					t.Errorf("inhibited by %s; want %v", by, a.want)
				}
			}
			if len(a.want) > 0 && len(g) == 0 {
				t.Errorf("not inhibited; want inhibited by one of %v", a.want)
			}
		})
	}
}

// eventually waits for cond, failing the test after a generous deadline
// that only catches a hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited too long for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
