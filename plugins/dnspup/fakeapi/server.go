package fakeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
)

// Result is what a pretend checkpoint reports for one target.
type Result struct {
	// Status is the HTTP status seen; 0 with Error set.
	Status int `json:"status,omitempty"`
	// Error is the failure text ("timeout", "connection refused", "tls: …").
	Error string `json:"error,omitempty"`
	// LatencyMs is the reported latency.
	LatencyMs float64 `json:"latencyMs,omitempty"`
}

// Options configures a Server.
type Options struct {
	// Key and Secret are the credentials the server accepts. When Key is
	// empty, any non-empty X-API-Key and X-API-Secret are accepted.
	Key, Secret string
	// Nodes are the checkpoints; DefaultNodes when empty.
	Nodes []customerapi.Node
	// Probe fetches a target for every checkpoint that has no scripted
	// result; FetchProbe with a 3s timeout when nil.
	Probe func(ctx context.Context, target string) Result
	// MaxBatchTargets bounds "targets" in a batch; 50 when 0.
	MaxBatchTargets int
	// PageSize, when > 0, splits GET /v1/nodes into pages of this many
	// nodes (see SetPageSize).
	PageSize int
	// AsyncPolls, when not 0, answers probe requests asynchronously (see
	// SetAsync).
	AsyncPolls int
}

// AsyncNever, given to SetAsync, makes asynchronous results never ready.
const AsyncNever = -1

// DefaultNodes are three pretend checkpoints.
var DefaultNodes = []customerapi.Node{
	{ID: "ams-1", Name: "Amsterdam 1", Country: "NL", City: "Amsterdam", Online: true},
	{ID: "fra-1", Name: "Frankfurt 1", Country: "DE", City: "Frankfurt", Online: true},
	{ID: "nyc-1", Name: "New York 1", Country: "US", City: "New York", Online: true},
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

type failure struct {
	code       string
	retryAfter time.Duration
	remaining  int // <= 0: until cleared
}

// Server is the fake API. Use it as an http.Handler.
type Server struct {
	opts  Options
	nodes map[string]bool

	mu       sync.Mutex
	fail     *failure
	scripted map[string]Result
	quota    int // < 0: unlimited
	delay    time.Duration
	accepted int
	counts   map[string]int
	log      []Request
	seq      int
	notify   chan struct{}
	pageSize int
	async    int               // 0: answer at once; n > 0: ready after n polls; AsyncNever
	pending  map[string]*async // by id
}

// async is an accepted probe request answered with 202.
type async struct {
	polls int // polls left before the result is ready; < 0: never
	body  any
}

// New returns a Server.
func New(opts Options) *Server {
	if len(opts.Nodes) == 0 {
		opts.Nodes = DefaultNodes
	}
	if opts.Probe == nil {
		opts.Probe = FetchProbe(3 * time.Second)
	}
	if opts.MaxBatchTargets <= 0 {
		opts.MaxBatchTargets = 50
	}
	s := &Server{
		opts:     opts,
		nodes:    map[string]bool{},
		scripted: map[string]Result{},
		quota:    -1,
		counts:   map[string]int{},
		notify:   make(chan struct{}),
		pageSize: max(0, opts.PageSize),
		async:    opts.AsyncPolls,
		pending:  map[string]*async{},
	}
	for _, n := range opts.Nodes {
		s.nodes[n.ID] = true
	}
	return s
}

// StatusOf is the HTTP status the API uses for an error code.
func StatusOf(code string) int {
	switch code {
	case customerapi.CodeInvalidRequest, customerapi.CodeInvalidNodes, customerapi.CodeTrustedDNSResolutionFailed:
		return http.StatusBadRequest
	case customerapi.CodeUnauthorized:
		return http.StatusUnauthorized
	case customerapi.CodeSourceForbidden, customerapi.CodeTargetRestricted, customerapi.CodeToolNotAllowed:
		return http.StatusForbidden
	case customerapi.CodeEntitlementExceeded:
		return http.StatusConflict
	case customerapi.CodeQuotaExceeded, customerapi.CodeRateLimited, customerapi.CodeCapacityLimited:
		return http.StatusTooManyRequests
	case customerapi.CodeServiceUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// FailNext makes the next n authenticated calls fail with code (and a
// Retry-After header when retryAfter > 0). n <= 0 means every call until
// cleared; code "" clears.
func (s *Server) FailNext(code string, retryAfter time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		s.fail = nil
		return
	}
	s.fail = &failure{code: code, retryAfter: retryAfter, remaining: n}
}

// SetResult scripts what checkpoint nodeID reports for every target; nil
// goes back to fetching.
func (s *Server) SetResult(nodeID string, r *Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == nil {
		delete(s.scripted, nodeID)
		return
	}
	s.scripted[nodeID] = *r
}

// SetQuota allows n more accepted probe requests; then quota_exceeded.
// n < 0: unlimited (the default).
func (s *Server) SetQuota(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 {
		s.quota = -1
		return
	}
	s.quota = s.accepted + n
}

// SetDelay makes every accepted probe request (POST /v1/probes and
// /v1/batch-probes) take d before it is answered, as a slow or overloaded
// API would; 0 (the default) answers at once. A client that gives up
// first gets no answer: the request still counts as accepted and costs
// quota, as with the real API.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = max(0, d)
}

// SetPageSize splits GET /v1/nodes into pages of n nodes; 0 (the
// default) answers every node at once. A page is
//
//	{"nodes": [...], "next_cursor": "2"}
//
// and the next page is GET /v1/nodes?cursor=2; the last page has no
// next_cursor. A Link header with rel="next" names the same URL.
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = max(0, n)
}

// SetAsync makes probe requests answer asynchronously, as a busy real API
// may: POST /v1/probes (or /v1/batch-probes) answers 202 Accepted
// {"id": ..., "status": "in-progress"} with a Location header, and GET
// /v1/probes/{id} (or /v1/batch-probes/{id}) answers the same 202 for the
// first polls-1 polls, then 200 with the result (polls 1: the first poll
// has it). AsyncNever: never ready. 0 (the default) answers at once. The
// request costs quota when accepted; polls cost none.
func (s *Server) SetAsync(polls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.async = polls
}

// Count is how many requests arrived for path ("/v1/probes", …).
func (s *Server) Count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[path]
}

// Accepted is how many probe requests were accepted (and cost quota).
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Requests returns a copy of every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Arrived returns a channel closed when the next request arrives.
func (s *Server) Arrived() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify
}

func (s *Server) record(r *http.Request, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[r.URL.Path]++
	s.log = append(s.log, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	close(s.notify)
	s.notify = make(chan struct{})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, customerapi.CodeInvalidRequest, "could not read the request body", 0)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/_fake/") {
		s.control(w, r, body)
		return
	}
	s.record(r, body)
	switch r.URL.Path {
	case "/v1/health":
		if r.Method != http.MethodGet {
			writeError(w, customerapi.CodeInvalidRequest, "use GET", 0)
			return
		}
		s.mu.Lock()
		down := s.fail != nil && s.fail.code == customerapi.CodeServiceUnavailable
		s.mu.Unlock()
		if down {
			writeError(w, customerapi.CodeServiceUnavailable, "service unavailable", 0)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
		return
	case "/v1/nodes", "/v1/probes", "/v1/batch-probes":
	default:
		if id, ok := pollID(r.URL.Path); ok && r.Method == http.MethodGet {
			if !s.authorized(r) {
				writeError(w, customerapi.CodeUnauthorized, "invalid API credentials", 0)
				return
			}
			if f := s.takeFailure(); f != nil {
				writeError(w, f.code, "scripted failure: "+f.code, f.retryAfter)
				return
			}
			s.poll(w, id)
			return
		}
		writeError(w, customerapi.CodeInvalidRequest, "no such endpoint", 0)
		return
	}
	if !s.authorized(r) {
		writeError(w, customerapi.CodeUnauthorized, "invalid API credentials", 0)
		return
	}
	if f := s.takeFailure(); f != nil {
		writeError(w, f.code, "scripted failure: "+f.code, f.retryAfter)
		return
	}
	switch r.URL.Path {
	case "/v1/nodes":
		if r.Method != http.MethodGet {
			writeError(w, customerapi.CodeInvalidRequest, "use GET", 0)
			return
		}
		s.listNodes(w, r)
	case "/v1/probes":
		s.probes(w, r, body, false)
	case "/v1/batch-probes":
		s.probes(w, r, body, true)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	key, secret := r.Header.Get("X-API-Key"), r.Header.Get("X-API-Secret")
	if s.opts.Key == "" {
		return key != "" && secret != ""
	}
	return key == s.opts.Key && secret == s.opts.Secret
}

func (s *Server) takeFailure() *failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail == nil {
		return nil
	}
	f := *s.fail
	if s.fail.remaining > 0 {
		s.fail.remaining--
		if s.fail.remaining == 0 {
			s.fail = nil
		}
	}
	return &f
}

type probeBody struct {
	Type      string   `json:"type"`
	Target    string   `json:"target"`
	Targets   []string `json:"targets"`
	IPVersion string   `json:"ipVersion"`
	Count     *int     `json:"count"`
	Method    string   `json:"method"`
	NodeIDs   []string `json:"nodeIds"`
}

func (s *Server) probes(w http.ResponseWriter, r *http.Request, body []byte, batch bool) {
	if r.Method != http.MethodPost {
		writeError(w, customerapi.CodeInvalidRequest, "use POST", 0)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, customerapi.CodeInvalidRequest, "Content-Type must be application/json", 0)
		return
	}
	var req probeBody
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, customerapi.CodeInvalidRequest, "body is not valid JSON", 0)
		return
	}
	targets := req.Targets
	if !batch {
		targets = []string{req.Target}
	}
	if msg := s.check(req, targets, batch); msg != "" {
		code := customerapi.CodeInvalidRequest
		if strings.HasPrefix(msg, "unknown node") {
			code = customerapi.CodeInvalidNodes
		}
		writeError(w, code, msg, 0)
		return
	}
	nodes := req.NodeIDs
	if len(nodes) == 0 {
		for _, n := range s.opts.Nodes {
			nodes = append(nodes, n.ID)
		}
	}
	s.mu.Lock()
	if s.quota >= 0 && s.accepted >= s.quota {
		s.mu.Unlock()
		writeError(w, customerapi.CodeQuotaExceeded, "monthly quota exceeded", 0)
		return
	}
	s.accepted++
	s.seq++
	id := s.seq
	delay := s.delay
	scripted := make(map[string]Result, len(s.scripted))
	for k, v := range s.scripted {
		scripted[k] = v
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client gave up: no one to answer
			t.Stop()
			return
		}
	}

	entries := make([]map[string]any, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			entries[i] = map[string]any{"target": t, "results": s.results(r.Context(), t, nodes, scripted)}
		})
	}
	wg.Wait()
	var answer any
	ids, path := fmt.Sprintf("bp_%d", id), "/v1/batch-probes/"
	if !batch {
		e := entries[0]
		ids, path = fmt.Sprintf("prb_%d", id), "/v1/probes/"
		e["id"] = ids
		e["type"] = "http"
		answer = e
	} else {
		answer = map[string]any{"id": ids, "type": "http", "results": entries}
	}
	s.mu.Lock()
	polls := s.async
	if polls != 0 {
		s.pending[ids] = &async{polls: polls, body: answer}
	}
	s.mu.Unlock()
	if polls != 0 {
		w.Header().Set("Location", path+ids)
		writeJSON(w, http.StatusAccepted, map[string]any{"id": ids, "status": "in-progress"})
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// pollID reads the id of GET /v1/probes/{id} or /v1/batch-probes/{id}.
func pollID(path string) (string, bool) {
	for _, p := range []string{"/v1/probes/", "/v1/batch-probes/"} {
		if id, ok := strings.CutPrefix(path, p); ok && id != "" && !strings.Contains(id, "/") {
			return id, true
		}
	}
	return "", false
}

// poll answers GET /v1/probes/{id}.
func (s *Server) poll(w http.ResponseWriter, id string) {
	s.mu.Lock()
	a := s.pending[id]
	var body any
	ready := false
	if a != nil && a.polls > 0 {
		a.polls--
		if a.polls == 0 {
			ready, body = true, a.body
			delete(s.pending, id)
		}
	}
	s.mu.Unlock()
	switch {
	case a == nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "not_found", "message": "no such probe id"}})
	case ready:
		writeJSON(w, http.StatusOK, body)
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "status": "in-progress"})
	}
}

// listNodes answers GET /v1/nodes, one page at a time when a page size is
// set.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	size := s.pageSize
	s.mu.Unlock()
	all := s.opts.Nodes
	if size <= 0 {
		writeJSON(w, http.StatusOK, map[string]any{"nodes": all})
		return
	}
	from := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > len(all) {
			writeError(w, customerapi.CodeInvalidRequest, fmt.Sprintf("cursor %q: not one this API gave", c), 0)
			return
		}
		from = n
	}
	to := min(len(all), from+size)
	page := map[string]any{"nodes": all[from:to]}
	if to < len(all) {
		next := strconv.Itoa(to)
		page["next_cursor"] = next
		w.Header().Set("Link", fmt.Sprintf(`</v1/nodes?cursor=%s>; rel="next"`, next))
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) check(req probeBody, targets []string, batch bool) string {
	if req.Type != "http" {
		if batch && (req.Type == "ping" || req.Type == "tcping") {
			return "this fake serves type \"http\" only"
		}
		return fmt.Sprintf("type %q: want \"http\"", req.Type)
	}
	if len(targets) == 0 {
		return "targets: want at least one"
	}
	if len(targets) > s.opts.MaxBatchTargets {
		return fmt.Sprintf("targets: at most %d", s.opts.MaxBatchTargets)
	}
	for _, t := range targets {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Sprintf("target %q: want an absolute http or https URL", t)
		}
	}
	switch req.IPVersion {
	case "", "4", "6":
	default:
		return "ipVersion: want \"4\" or \"6\""
	}
	if req.Count != nil && (*req.Count < 1 || *req.Count > 10) {
		return "count: want 1..10"
	}
	switch req.Method {
	case "", "GET", "HEAD":
	default:
		return "method: want GET or HEAD"
	}
	for _, id := range req.NodeIDs {
		if !s.nodes[id] {
			return fmt.Sprintf("unknown node id %q", id)
		}
	}
	return ""
}

func (s *Server) results(ctx context.Context, target string, nodes []string, scripted map[string]Result) []map[string]any {
	var fetched *Result
	out := make([]map[string]any, 0, len(nodes))
	for _, id := range nodes {
		res, ok := scripted[id]
		if !ok {
			if fetched == nil {
				r := s.opts.Probe(ctx, target)
				fetched = &r
			}
			res = *fetched
		}
		e := map[string]any{"nodeId": id}
		if res.Error != "" {
			e["error"] = res.Error
		} else {
			e["status"] = res.Status
		}
		if res.LatencyMs > 0 {
			e["latencyMs"] = math.Round(res.LatencyMs*10) / 10
		}
		out = append(out, e)
	}
	return out
}

// FetchProbe returns a probe that GETs the target from this process, without
// following redirects, and reports what a checkpoint would.
func FetchProbe(timeout time.Duration) func(ctx context.Context, target string) Result {
	client := &http.Client{
		Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return func(ctx context.Context, target string) Result {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return Result{Error: "invalid target"}
		}
		req.Header.Set("User-Agent", "dnspup-fake-checkpoint")
		resp, err := client.Do(req)
		ms := float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			return Result{Error: describe(err), LatencyMs: ms}
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return Result{Status: resp.StatusCode, LatencyMs: ms}
	}
}

func describe(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "connection reset"):
		return "connection reset by peer"
	case strings.Contains(err.Error(), "tls:"), strings.Contains(err.Error(), "x509:"):
		return "tls: handshake failed"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func (s *Server) control(w http.ResponseWriter, r *http.Request, body []byte) {
	switch {
	case r.URL.Path == "/_fake/stats" && r.Method == http.MethodGet:
		s.mu.Lock()
		stats := map[string]any{"requests": maps(s.counts), "accepted": s.accepted}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, stats)
	case r.URL.Path == "/_fake/fail" && r.Method == http.MethodPost:
		var in struct {
			Code       string  `json:"code"`
			RetryAfter float64 `json:"retryAfter"`
			Count      int     `json:"count"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			writeError(w, customerapi.CodeInvalidRequest, "body: "+err.Error(), 0)
			return
		}
		s.FailNext(in.Code, time.Duration(in.RetryAfter*float64(time.Second)), in.Count)
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	case r.URL.Path == "/_fake/delay" && r.Method == http.MethodPost:
		var in struct {
			Seconds float64 `json:"seconds"`
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Seconds < 0 {
			writeError(w, customerapi.CodeInvalidRequest, "body: want {\"seconds\":N} with N >= 0 (0: answer at once)", 0)
			return
		}
		s.SetDelay(time.Duration(in.Seconds * float64(time.Second)))
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	case r.URL.Path == "/_fake/node" && r.Method == http.MethodPost:
		var in struct {
			NodeID string `json:"nodeId"`
			Result
		}
		if err := json.Unmarshal(body, &in); err != nil || in.NodeID == "" {
			writeError(w, customerapi.CodeInvalidRequest, "body: want {\"nodeId\":…,\"status\":…|\"error\":…}", 0)
			return
		}
		if in.Status == 0 && in.Error == "" {
			s.SetResult(in.NodeID, nil)
		} else {
			s.SetResult(in.NodeID, &in.Result)
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	default:
		writeError(w, customerapi.CodeInvalidRequest, "no such control endpoint", 0)
	}
}

func maps(m map[string]int) map[string]int {
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code, message string, retryAfter time.Duration) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(retryAfter.Seconds()))))
	}
	writeJSON(w, StatusOf(code), map[string]any{"error": map[string]any{"code": code, "message": message}})
}
