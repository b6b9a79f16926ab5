package publication_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

func TestFollowerNext(t *testing.T) {
	var gotAuth, gotWait string
	answer := func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotWait = r.Header.Get("Authorization"), r.URL.Query().Get("wait")
		after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		switch after {
		case 1: // something newer
			json.NewEncoder(w).Encode(publication.Snapshot{Version: 2, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 2}}})
		case 2: // nothing newer
			w.WriteHeader(http.StatusNotModified)
		case 9: // another history: the control plane is at version 3
			json.NewEncoder(w).Encode(publication.Snapshot{Version: 3})
		case 5: // a broken server answering the same version
			json.NewEncoder(w).Encode(publication.Snapshot{Version: 5})
		default:
			http.Error(w, `{"error":{"code":"unauthorized","message":"no"}}`, http.StatusUnauthorized)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(answer))
	t.Cleanup(srv.Close)
	f := &publication.Follower{BaseURL: srv.URL + "/", Token: "tok", Wait: 7 * time.Second}
	tests := []struct {
		name    string
		after   uint64
		version uint64
		err     string
	}{
		{"newer", 1, 2, ""},
		{"not modified", 2, 0, publication.ErrNotModified.Error()},
		{"history restarted", 9, 3, ""},
		{"same version is an error", 5, 0, "answered version 5"},
		{"HTTP error", 7, 0, "401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := f.Next(context.Background(), tt.after)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				if tt.err == publication.ErrNotModified.Error() && !errors.Is(err, publication.ErrNotModified) {
					t.Fatalf("err %v is not ErrNotModified", err)
				}
				return
			}
			if err != nil || snap.Version != tt.version {
				t.Fatalf("Next = %+v, %v; want version %d", snap, err, tt.version)
			}
		})
	}
	if gotAuth != "Bearer tok" || gotWait != "7s" {
		t.Fatalf("request had Authorization %q and wait %q", gotAuth, gotWait)
	}
}

func TestSnapshotSiteByHost(t *testing.T) {
	s := &publication.Snapshot{Sites: []publication.Site{{Name: "www", Hostname: "www.example.com"}}}
	for _, host := range []string{"www.example.com", "WWW.Example.com.", "www.example.com:8080"} {
		if s.Site(host) == nil {
			t.Errorf("Site(%q) = nil", host)
		}
	}
	if s.Site("other.example.com") != nil {
		t.Error("an unknown host matched")
	}
}

// TestSiteBackupWire: a site's Backup is "backup" with its level and
// origins, and a site without one has no "backup" key at all, so that its
// JSON is the one readers knew before Backup existed.
func TestSiteBackupWire(t *testing.T) {
	tests := []struct {
		name string
		site publication.Site
		want string
	}{
		{"no backup", publication.Site{Name: "www", Hostname: "www.example.com", Level: 1, Origins: []publication.Origin{}},
			`{"site":"www","hostname":"www.example.com","level":1,"origins":[]}`},
		{"backup", publication.Site{Name: "www", Hostname: "www.example.com", Level: 1, Origins: []publication.Origin{},
			Backup: &publication.Backup{Level: 2, Origins: []publication.Origin{{Name: "b1", Address: "http://127.0.0.1:1", State: "unknown"}}}},
			`{"site":"www","hostname":"www.example.com","level":1,"origins":[],"backup":{"level":2,"origins":[{"name":"b1","address":"http://127.0.0.1:1","state":"unknown"}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.site)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("JSON\n%s\nwant\n%s", b, tt.want)
			}
			var back publication.Site
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if (back.Backup == nil) != (tt.site.Backup == nil) || (back.Backup != nil && (back.Backup.Level != 2 || len(back.Backup.Origins) != 1)) {
				t.Fatalf("decoded backup %+v", back.Backup)
			}
		})
	}
}

// TestFollowerStatusError: an answer other than 200 or 304 is a
// *StatusError carrying its code, so that a follower of a cluster can tell
// a refusal from a network error.
func TestFollowerStatusError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"not_leader"}}`, http.StatusMisdirectedRequest)
	}))
	t.Cleanup(srv.Close)
	_, err := (&publication.Follower{BaseURL: srv.URL}).Next(context.Background(), 0)
	var se *publication.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusMisdirectedRequest || !strings.Contains(se.Body, "not_leader") {
		t.Fatalf("err %v (%T), want a *StatusError with 421 and the body", err, err)
	}
	if !strings.Contains(err.Error(), "421") {
		t.Fatalf("err %q does not name the status", err)
	}
}
