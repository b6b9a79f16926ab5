package publication_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestAcknowledge: the acknowledgement is a POST of the JSON to
// /v1/publication/applied with the token; a control plane without the
// route (404) is ErrAcknowledgeUnsupported, another refusal an error
// naming its status.
func TestAcknowledge(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	want := publication.Applied{Node: "edge-1", Version: 7, At: at, Proxying: true,
		Sites: []publication.AppliedSite{{Site: "www", FromLevel: 1, ToLevel: 2, LastRequest: &at, Requests: 4, Failures: 3}}}
	for _, tc := range []struct {
		name   string
		status int
		check  func(error) bool
	}{
		{"taken", http.StatusNoContent, func(err error) bool { return err == nil }},
		{"older control plane", http.StatusNotFound, func(err error) bool { return errors.Is(err, publication.ErrAcknowledgeUnsupported) }},
		{"refused", http.StatusForbidden, func(err error) bool {
			return err != nil && !errors.Is(err, publication.ErrAcknowledgeUnsupported) && strings.Contains(err.Error(), "403")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got publication.Applied
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/v1/publication/applied" || r.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("%s %s, Authorization %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
				}
				if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
					t.Error(err)
				}
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			f := &publication.Follower{BaseURL: srv.URL, Token: "tok"}
			err := f.Acknowledge(context.Background(), want)
			if !tc.check(err) {
				t.Fatalf("error %v", err)
			}
			if got.Node != want.Node || got.Version != want.Version || !got.At.Equal(at) || len(got.Sites) != 1 || got.Sites[0].Failures != 3 {
				t.Fatalf("the control plane got %+v", got)
			}
		})
	}
}
