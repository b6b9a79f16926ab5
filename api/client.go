package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// DefaultAddress is the agent's API address when none is given.
const DefaultAddress = "http://127.0.0.1:8470"

// maxAnswer bounds what the client reads of one answer.
const maxAnswer = 256 << 20

// Client calls an agent's API. Its methods are safe for concurrent use.
type Client struct {
	base  string
	token string
	// Actor is sent as X-Vigil-Actor with every change: who acts, for the
	// journal ("alice@host (cli)").
	Actor string
	// HTTP is the client used (a two-minute timeout by default; long polls
	// ask for less).
	HTTP *http.Client
}

// NewClient returns a client of the agent at addr (a URL, or host:port for
// http), with token for the calls that need it ("" for none).
func NewClient(addr, token string) *Client {
	if addr == "" {
		addr = DefaultAddress
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return &Client{base: strings.TrimSuffix(addr, "/"), token: token, HTTP: &http.Client{Timeout: 2 * time.Minute}}
}

// Address is the base URL the client calls.
func (c *Client) Address() string { return c.base }

// Do sends a request to path (with its query) and decodes the answer into
// out: a *json.RawMessage keeps it as it came, nil drops it. An answer of
// 300 or more is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.do(ctx, method, path, body, out)
	return err
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("bad address %q: %w", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.Actor != "" && method != http.MethodGet {
		req.Header.Set("X-Vigil-Actor", c.Actor)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if tlsErr := explainTLS(err); tlsErr != err {
			return 0, fmt.Errorf("https to the agent at %s: %w", c.base, tlsErr)
		}
		return 0, fmt.Errorf("cannot reach the agent at %s: %w (is `vigil agent` running? set -address or VIGIL_ADDR)", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("reading the answer of %s: %w", c.base, err)
	}
	if resp.StatusCode == http.StatusNotModified {
		return resp.StatusCode, nil
	}
	if resp.StatusCode == http.StatusBadRequest && bytes.Contains(b, []byte(plainToHTTPS)) {
		return resp.StatusCode, fmt.Errorf("the agent at %s serves https: use an https:// address (-address or VIGIL_ADDR)", c.base)
	}
	if resp.StatusCode >= 300 {
		var e errorBody
		if json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != "" {
			e.Error.Status = resp.StatusCode
			return resp.StatusCode, e.Error
		}
		return resp.StatusCode, &Error{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
	}
	switch o := out.(type) {
	case nil:
	case *json.RawMessage:
		*o = append((*o)[:0], b...)
	default:
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding the answer of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func sitePath(site string) string { return "/v1/sites/" + url.PathEscape(site) }

// Sites reads one page of GET /v1/sites.
func (c *Client) Sites(ctx context.Context, q SitesQuery) (*SitesPage, error) {
	v := url.Values{}
	if len(q.Statuses) > 0 {
		v.Set("status", strings.Join(q.Statuses, ","))
	}
	if q.Level != 0 {
		v.Set("level", strconv.Itoa(q.Level))
	}
	if q.Problem {
		v.Set("problem", "true")
	}
	if q.Prefix != "" {
		v.Set("prefix", q.Prefix)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	path := "/v1/sites"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var p SitesPage
	if err := c.Do(ctx, http.MethodGet, path, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Site reads one site.
func (c *Client) Site(ctx context.Context, site string) (*SiteView, error) {
	var v SiteView
	if err := c.Do(ctx, http.MethodGet, sitePath(site), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Reload makes the agent read its configuration file again and apply it,
// as SIGHUP does (POST /v1/reload, operator token). A refused reload is
// an *Error with CodeReloadRefused whose message holds the diagnostics.
func (c *Client) Reload(ctx context.Context) (*ReloadAnswer, error) {
	var a ReloadAnswer
	if err := c.Do(ctx, http.MethodPost, "/v1/reload", struct{}{}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Switch switches site to level by hand.
func (c *Client) Switch(ctx context.Context, site string, level int) (*ActionResult, error) {
	return c.switchTo(ctx, site, level, false)
}

// SwitchRamped switches site back to a higher level by hand, with the way
// back ramped as an automatic failback is (the site needs a ramp
// configured: else an *Error with CodeNoRamp).
func (c *Client) SwitchRamped(ctx context.Context, site string, level int) (*ActionResult, error) {
	return c.switchTo(ctx, site, level, true)
}

func (c *Client) switchTo(ctx context.Context, site string, level int, ramp bool) (*ActionResult, error) {
	body := map[string]any{"level": level}
	if ramp {
		body["ramp"] = true
	}
	var a ActionResult
	if err := c.Do(ctx, http.MethodPost, sitePath(site)+"/switch", body, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Disable takes origin out; force passes the guard on the last enabled
// origin of the site's current level.
func (c *Client) Disable(ctx context.Context, site, origin string, force bool) (*ActionResult, error) {
	path := sitePath(site) + "/origins/" + url.PathEscape(origin) + "/disable"
	if force {
		path += "?force=true"
	}
	var a ActionResult
	if err := c.Do(ctx, http.MethodPost, path, struct{}{}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Enable puts a disabled origin back.
func (c *Client) Enable(ctx context.Context, site, origin string) (*ActionResult, error) {
	var a ActionResult
	if err := c.Do(ctx, http.MethodPost, sitePath(site)+"/origins/"+url.PathEscape(origin)+"/enable", struct{}{}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Probe runs one dry-run round for site through the agent's chain.
func (c *Client) Probe(ctx context.Context, site string) (*ProbeResult, error) {
	var r ProbeResult
	if err := c.Do(ctx, http.MethodPost, sitePath(site)+"/probe", struct{}{}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// EventsQuery selects journal events: those after After, of Site when
// set, at most Limit (0: the server's default); Wait long-polls for the
// first new one.
type EventsQuery struct {
	After uint64
	Site  string
	Limit int
	Wait  time.Duration
}

// Events reads the journal.
func (c *Client) Events(ctx context.Context, q EventsQuery) ([]EventLine, error) {
	v := url.Values{"after": {strconv.FormatUint(q.After, 10)}}
	if q.Site != "" {
		v.Set("site", q.Site)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait > 0 {
		v.Set("wait", q.Wait.String())
	}
	var p EventsPage
	if err := c.Do(ctx, http.MethodGet, "/v1/events?"+v.Encode(), nil, &p); err != nil {
		return nil, err
	}
	return p.Events, nil
}

// Publication returns the first snapshot newer than after, waiting up to
// wait for it; changed is false (and snap nil) when none came.
func (c *Client) Publication(ctx context.Context, after uint64, wait time.Duration) (snap *publication.Snapshot, changed bool, err error) {
	v := url.Values{"after": {strconv.FormatUint(after, 10)}, "wait": {wait.String()}}
	var s publication.Snapshot
	status, err := c.do(ctx, http.MethodGet, "/v1/publication?"+v.Encode(), nil, &s)
	if err != nil || status == http.StatusNotModified {
		return nil, false, err
	}
	return &s, true, nil
}

// Nodes reads what the sources report about their nodes.
func (c *Client) Nodes(ctx context.Context) (*NodesAnswer, error) {
	var n NodesAnswer
	if err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Sources lists the chain's sources with their plugin processes.
func (c *Client) Sources(ctx context.Context) ([]SourceInfo, error) {
	var s SourcesAnswer
	if err := c.Do(ctx, http.MethodGet, "/v1/sources", nil, &s); err != nil {
		return nil, err
	}
	return s.Sources, nil
}

// Cluster reads this instance's place in the cluster (an etcd store); an
// *Error with Status 404 for an agent without one.
func (c *Client) Cluster(ctx context.Context) (*ClusterInfo, error) {
	var i ClusterInfo
	if err := c.Do(ctx, http.MethodGet, "/v1/cluster", nil, &i); err != nil {
		return nil, err
	}
	return &i, nil
}
