package publication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Snapshot is the whole publication at one version. Versions only grow; a
// new version is published whenever a site's current level, or the set or
// state of that level's enabled origins, changes (or its Ramp or its
// Backup does).
type Snapshot struct {
	// Version is the publication version, starting at 1.
	Version uint64 `json:"version"`
	// Format is the publication format: FormatRamp when sites may carry a
	// Ramp, 0 (the first format) before. The format only grows: a reader
	// ignores the fields it does not know, and what it knows keeps its
	// meaning. Site.Backup needs no format of its own: a site without it
	// is served as before it existed, whatever the format.
	Format int `json:"format,omitempty"`
	// Sites lists every site, sorted by name.
	Sites []Site `json:"sites"`
}

// FormatRamp is the format whose sites may carry a Ramp.
const FormatRamp = 2

// Site is one site as published.
type Site struct {
	// Name is the site's name in the configuration.
	Name string `json:"site"`
	// Hostname is the site's DNS name (the Host header visitors send).
	Hostname string `json:"hostname"`
	// Level is the current level number: nodes choose origins from it.
	Level int `json:"level"`
	// Origins are the current level's enabled origins.
	Origins []Origin `json:"origins"`
	// Ramp, when set, is a failback in progress, traffic returning to Level
	// in steps (see vigil's docs/antiflap.md): Level's Origins get Weight
	// per cent of new requests and the level being left, Ramp.From, the
	// rest. A reader that does not know Ramp follows Level and its Origins,
	// as before the ramp existed.
	Ramp *Ramp `json:"ramp,omitempty"`
	// Backup, when set, is the level the control plane would fail the
	// site over to next, were Level to fail now, with its origins that may
	// serve. It is a hint for a reader that serves traffic itself (as
	// nginx's "backup" servers are): when every origin of Level fails for
	// a request, the request may go to Backup's origins instead of failing
	// while the control plane has not yet switched. Level stays the
	// site's level: a DNS publisher or any reader that answers with the
	// site's origins must not answer with Backup's. Nil when no other
	// level may serve (the site has one level, or every other level is
	// unhealthy or has no enabled origin). A reader that does not know
	// Backup follows Level, as before Backup existed.
	Backup *Backup `json:"backup,omitempty"`
}

// Backup is the level a site would fail over to next, as Site.Backup
// publishes it.
type Backup struct {
	// Level is the level number, chosen as the control plane chooses a
	// failover's level: of the levels after the site's Level in ascending
	// order, then those before it in ascending order, the first healthy
	// one, else the first that is unknown (not confirmed down).
	Level int `json:"level"`
	// Origins are Level's enabled origins that are not unhealthy; never
	// empty.
	Origins []Origin `json:"origins"`
}

// Ramp is the split of a site's traffic during a failback ramp.
type Ramp struct {
	// Weight is the per cent of new requests (and DNS answers) that go to
	// the site's Level, from 1 to 99; the rest go to From.
	Weight int `json:"weight"`
	// From is the level the site is leaving, and FromOrigins its enabled
	// origins that are not unhealthy.
	From        int      `json:"from"`
	FromOrigins []Origin `json:"from_origins"`
}

// Origin is one enabled origin of a site's current level (or of its
// ramp's level being left, or of its backup level).
type Origin struct {
	Name string `json:"name"`
	// Address is the origin URL: scheme, host and optional port.
	Address string `json:"address"`
	// State is "unknown", "healthy" or "unhealthy" as the control plane
	// judges it.
	State string `json:"state"`
}

// Site returns the site whose hostname is host (case-insensitive, port and
// trailing dot ignored), or nil.
func (s *Snapshot) Site(host string) *Site {
	if h, _, ok := strings.Cut(host, ":"); ok && !strings.Contains(h, "]") {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for i := range s.Sites {
		if s.Sites[i].Hostname == host {
			return &s.Sites[i]
		}
	}
	return nil
}

// ErrNotModified is returned by Follower.Next when the wait ended with no
// version newer than the one asked after.
var ErrNotModified = errors.New("publication not modified")

// StatusError is returned by Follower.Next when the control plane answered
// with a status other than 200 or 304, so that a caller can tell a refused
// token (401, 403) or an instance that points elsewhere (421, sent by an
// instance of a cluster that is not the one to ask) from a network error
// with errors.As.
type StatusError struct {
	// URL is the request's URL, without credentials.
	URL string
	// Code is the HTTP status code, such as 401; Status its line, such as
	// "401 Unauthorized".
	Code   int
	Status string
	// Body is the start of the answer's body (the API's error JSON).
	Body string
}

// Error says what the control plane answered.
func (e *StatusError) Error() string {
	return fmt.Sprintf("publication: GET %s: %s: %s", e.URL, e.Status, e.Body)
}

// Follower reads the publication from a control plane.
type Follower struct {
	// BaseURL is the control plane's API address, such as
	// "http://127.0.0.1:8470".
	BaseURL string
	// Token is sent as a bearer token when not empty.
	Token string
	// Wait is how long the control plane holds a request open when nothing
	// is newer (default 30s).
	Wait time.Duration
	// Client is the HTTP client (default: one with a timeout of Wait plus
	// 10 seconds).
	Client *http.Client
}

// Next returns the first snapshot with a version greater than after. It
// blocks up to Wait; when nothing changed it returns ErrNotModified. When
// the control plane's history restarted (its versions are all below after),
// it returns the control plane's current snapshot at once, whose Version is
// then below after: apply it all the same when following one control
// plane. A reader of a cluster (several agents sharing one store) gets the
// same answer from a standby that has not yet caught up with the newest
// commit: versions are the cluster's, so it should apply an older version
// only from the instance that says, at GET /v1/cluster, that it is the
// acting leader, as vigil-node does (vigil's docs/ha.md).
func (f *Follower) Next(ctx context.Context, after uint64) (*Snapshot, error) {
	wait := f.Wait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	client := f.Client
	if client == nil {
		client = &http.Client{Timeout: wait + 10*time.Second}
	}
	u, err := url.Parse(strings.TrimSuffix(f.BaseURL, "/") + "/v1/publication")
	if err != nil {
		return nil, fmt.Errorf("publication: control plane address %q: %w", f.BaseURL, err)
	}
	q := u.Query()
	q.Set("after", strconv.FormatUint(after, 10))
	q.Set("wait", wait.String())
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("publication: %w", err)
	}
	if f.Token != "" {
		req.Header.Set("Authorization", "Bearer "+f.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("publication: GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		return nil, ErrNotModified
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &StatusError{URL: u.Redacted(), Code: resp.StatusCode, Status: resp.Status, Body: strings.TrimSpace(string(b))}
	}
	var snap Snapshot
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&snap); err != nil {
		return nil, fmt.Errorf("publication: decoding the snapshot: %w", err)
	}
	if snap.Version == after || snap.Version == 0 {
		return nil, fmt.Errorf("publication: the control plane answered version %d to a request for a version after %d", snap.Version, after)
	}
	// A version below after means the control plane's history restarted
	// (it lost its store): its snapshot is the truth now.
	return &snap, nil
}
