package publication

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Applied is a node's acknowledgement of one publication version: when its
// edge applied it and with what result, and, for each site whose level the
// version changed for the node, what the node's own traffic saw of the
// level it left. The control plane builds its failover reports from them
// (vigil's docs/failover-time.md). A reader that does not send them is
// shown as "not reported".
type Applied struct {
	// Node is the node's id.
	Node string `json:"node"`
	// Version is the publication version applied.
	Version uint64 `json:"version"`
	// At is when the node's edge applied it: its own proxy took it, or
	// every edge it drives applied it, or the first of them failed to.
	At time.Time `json:"at"`
	// Error is empty when the edge applied it, the edge's error text
	// when it refused it.
	Error string `json:"error,omitempty"`
	// Proxying is true when the node serves visitors with its own proxy:
	// only then are the Sites' LastRequest and counts known.
	Proxying bool `json:"proxying,omitempty"`
	// Sites are the sites whose level changed for the node with this
	// version (from the version it served before).
	Sites []AppliedSite `json:"sites,omitempty"`
}

// AppliedSite is what a node saw of the level a site left.
type AppliedSite struct {
	// Site is the site's name; FromLevel the level it served before,
	// ToLevel the level it serves now.
	Site      string `json:"site"`
	FromLevel int    `json:"from_level"`
	ToLevel   int    `json:"to_level"`
	// LastRequest is the last time the node's proxy sent a request to an
	// origin of FromLevel, when it sent one.
	LastRequest *time.Time `json:"last_request,omitempty"`
	// Requests and Failures count the real requests to FromLevel's
	// origins in the node's passive windows when it applied the version,
	// and the failed ones.
	Requests int `json:"requests"`
	Failures int `json:"failures"`
}

// ErrAcknowledgeUnsupported is returned by Follower.Acknowledge when the
// control plane does not take acknowledgements (an older version): stop
// sending them to it.
var ErrAcknowledgeUnsupported = errors.New("publication: the control plane does not take acknowledgements (POST /v1/publication/applied); it is older than the node")

// Acknowledge tells the control plane that a publication version was
// applied (POST /v1/publication/applied). It waits at most 10 seconds.
func (f *Follower) Acknowledge(ctx context.Context, a Applied) error {
	client := f.Client
	if client == nil {
		client = &http.Client{}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := url.Parse(strings.TrimSuffix(f.BaseURL, "/") + "/v1/publication/applied")
	if err != nil {
		return fmt.Errorf("publication: control plane address %q: %w", f.BaseURL, err)
	}
	body, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("publication: encoding the acknowledgement: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("publication: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if f.Token != "" {
		req.Header.Set("Authorization", "Bearer "+f.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("publication: POST %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return ErrAcknowledgeUnsupported
	case resp.StatusCode >= 300:
		return fmt.Errorf("publication: POST %s: %s: %s", u.Redacted(), resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
