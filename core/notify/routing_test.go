package notify_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/notify"
)

// TestWebhookRouting: a webhook gets only the event kinds it lists, from a
// URL read from the environment, with headers whose values come from the
// environment too; neither secret reaches the log.
func TestWebhookRouting(t *testing.T) { // not parallel: Setenv
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	rc := newReceiver(t, nil)
	t.Setenv("ROUTING_HOOK_URL", rc.URL+"/hook/secret-path-token")
	t.Setenv("ROUTING_HOOK_AUTH", "Bearer hook-secret-token")
	startAt(t, st, 0, "origins")
	commit(t, st, story()...)
	n := &config.Notifier{Kind: config.NotifierWebhook, Name: "origins", URLEnv: "ROUTING_HOOK_URL", Format: "json", Timeout: wait,
		Events: []string{"origin_state"}, Headers: map[string]string{"X-Team": "cdn"}, HeaderEnv: map[string]string{"Authorization": "ROUTING_HOOK_AUTH"}}
	lb, logger := newLog()
	d, err := notify.New(st, []*config.Notifier{n}, logger)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	for _, want := range []uint64{1, 4} { // the story's two origin_state events
		r := rc.next(t)
		var b notify.JSONBody
		if err := json.Unmarshal(r.Body, &b); err != nil || b.Seq != want || b.Kind != "origin_state" {
			t.Fatalf("got %s, want origin_state %d", r.Body, want)
		}
		if r.Header.Get("Authorization") != "Bearer hook-secret-token" || r.Header.Get("X-Team") != "cdn" {
			t.Errorf("headers %v", r.Header)
		}
	}
	eventually(t, "the cursor past the story", func() bool { return cursor(t, st, "origins") == 7 })
	if len(rc.got) != 0 {
		t.Errorf("the webhook got events it did not ask for")
	}
	if s := lb.String(); strings.Contains(s, "secret-path-token") || strings.Contains(s, "hook-secret-token") {
		t.Errorf("a secret reached the log:\n%s", s)
	}
}

// TestWebhookURLFromFileAndErrors: url_file is read at start; a missing
// variable or file refuses the dispatcher with the name, not the value.
func TestWebhookURLFromFileAndErrors(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir(), 0)
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	file := filepath.Join(dir, "url")
	if err := os.WriteFile(file, []byte("  https://hooks.example.com/x?token=file-secret \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := &config.Notifier{Kind: config.NotifierWebhook, Name: "f", URLFile: file, Format: "json"}
	if _, err := notify.New(st, []*config.Notifier{good}, nil); err != nil {
		t.Fatalf("url_file: %v", err)
	}
	for _, tt := range []struct {
		name string
		n    *config.Notifier
		want string
	}{
		{"unset variable", &config.Notifier{Kind: config.NotifierWebhook, Name: "e", URLEnv: "ROUTING_NOT_SET_ANYWHERE", Format: "json"}, "url_env names ROUTING_NOT_SET_ANYWHERE, which is unset or empty"},
		{"missing file", &config.Notifier{Kind: config.NotifierWebhook, Name: "m", URLFile: filepath.Join(dir, "nope"), Format: "json"}, "url_file"},
		{"unset header variable", &config.Notifier{Kind: config.NotifierWebhook, Name: "h", URL: "https://hooks.example.com/x", Format: "json",
			HeaderEnv: map[string]string{"Authorization": "ROUTING_NOT_SET_EITHER"}}, "header_env gives header Authorization the variable ROUTING_NOT_SET_EITHER"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := notify.New(st, []*config.Notifier{tt.n}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "file-secret") {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}
