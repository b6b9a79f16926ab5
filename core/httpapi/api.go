package httpapi

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	vapi "github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/readmodel"
	"github.com/vigilcdn/vigil/core/store"
)

// Options configure the API handler.
type Options struct {
	Engine *engine.Engine
	// Token is the operator's bearer token: every read and change; empty
	// disables changes.
	Token string
	// ReadToken, when set, is a token with the read scope: every read,
	// no change. NodeToken, when set, has the node scope: only what an
	// edge node reads (the publication and the sites). See Scope.
	ReadToken, NodeToken string
	// ReadsNeedToken makes reads need a token too.
	ReadsNeedToken bool
	// Gatherer serves /metrics (prometheus.DefaultGatherer when nil).
	Gatherer prometheus.Gatherer
	Logger   hclog.Logger
	// MaxWait caps the wait of long-polls (default 2 minutes).
	MaxWait time.Duration
	// Extra registers more handlers on the mux (the status page).
	Extra func(mux *http.ServeMux)
	// History serves GET /v1/sites/{site}/history (nil: no history kept).
	History *engine.HistoryFeed
	// Reload serves POST /v1/reload (operator token): the configuration
	// file read again and applied, as SIGHUP does. A refusal is a
	// *vapi.Error (its Status is set here). Nil: no such endpoint.
	Reload func() (vapi.ReloadAnswer, error)
	// DNSUpdates, when set, adds each site view's dns_update (the state
	// of publish "dns_update" for the site's name).
	DNSUpdates readmodel.DNSUpdates
}

type handler struct {
	Options
	mux    *http.ServeMux
	access atomic.Pointer[access]
}

// access is who may read and change: swapped as a whole by SetAccess.
type access struct {
	token, readToken, nodeToken string
	readsNeedToken              bool
}

// Handler is the API's http.Handler.
type Handler struct{ h *handler }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// SetAccess replaces the operator's token and whether reads need it (a
// reload of control { api { } }), for every request from now on; the
// read and node tokens are dropped.
func (h *Handler) SetAccess(token string, readsNeedToken bool) {
	h.SetTokens(Tokens{Operator: token}, readsNeedToken)
}

// Tokens are the API's bearer tokens by scope; an empty one is not set.
type Tokens struct{ Operator, Read, Node string }

// SetTokens replaces every token and whether reads need one, for every
// request from now on.
func (h *Handler) SetTokens(t Tokens, readsNeedToken bool) {
	h.h.access.Store(&access{token: t.Operator, readToken: t.Read, nodeToken: t.Node, readsNeedToken: readsNeedToken})
}

// New returns the API's http.Handler.
func New(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 2 * time.Minute
	}
	h := &handler{Options: opts, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /v1/sites", h.nodeRead(h.sites))
	h.mux.HandleFunc("GET /v1/sites/{site}", h.nodeRead(h.site))
	h.mux.HandleFunc("GET /v1/sites/{site}/history", h.read(h.history))
	h.mux.HandleFunc("GET /v1/summary", h.read(h.summary))
	h.mux.HandleFunc("POST /v1/sites/{site}/switch", h.write(h.switchLevel))
	h.mux.HandleFunc("POST /v1/sites/{site}/probe", h.privileged("probes", "a probe changes nothing but needs the API token, as it runs a real round of the chain", h.probe))
	h.mux.HandleFunc("POST /v1/sites/{site}/origins/{origin}/{action}", h.write(h.originAction))
	h.drillRoutes()    // drill.go
	h.failoverRoutes() // failovers.go
	if opts.Reload != nil {
		h.mux.HandleFunc("POST /v1/reload", h.write(h.reload))
	}
	h.mux.HandleFunc("GET /v1/events", h.read(h.events))
	h.mux.HandleFunc("GET /v1/publication", h.nodeRead(h.publication))
	h.mux.HandleFunc("GET /v1/nodes", h.read(h.nodes))
	h.mux.HandleFunc("GET /v1/sources", h.read(h.sources))
	h.mux.HandleFunc("GET /metrics", h.read(h.metrics))
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	h.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s %s; see GET /v1/sites, /v1/events, /v1/publication", r.Method, r.URL.Path))
	})
	if opts.Extra != nil {
		opts.Extra(h.mux)
	}
	h.access.Store(&access{token: opts.Token, readToken: opts.ReadToken, nodeToken: opts.NodeToken, readsNeedToken: opts.ReadsNeedToken})
	return &Handler{h: h}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// writeError answers with the API's one error type (vapi.Error).
func writeError(w http.ResponseWriter, status int, code, msg string, hint ...string) {
	e := &vapi.Error{Status: status, Code: code, Message: msg}
	if len(hint) > 0 {
		e.Hint = hint[0]
	}
	vapi.WriteError(w, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) { vapi.WriteJSON(w, status, v) }

// checkToken is the scope of the request's bearer token (compared in
// constant time with each token set), scopeNone when it carried none,
// scopeRefused when it matches none.
func (h *handler) checkToken(r *http.Request, a *access) Scope {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got = strings.TrimSpace(got)
	if !ok || got == "" {
		return scopeNone
	}
	found := scopeRefused
	for _, t := range []struct {
		token string
		scope Scope
	}{{a.token, ScopeOperator}, {a.readToken, ScopeRead}, {a.nodeToken, ScopeNode}} {
		if t.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(t.token)) == 1 {
			found = t.scope
		}
	}
	return found
}

// refuseToken answers a request whose token does not reach the scope
// want; need says what needed one, such as "changes need the operator's
// token".
func refuseToken(w http.ResponseWriter, r *http.Request, got, want Scope, need string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
	switch got {
	case scopeNone:
		writeError(w, http.StatusUnauthorized, "token_missing",
			need+", and the request carried none: send Authorization: Bearer TOKEN (vigil -token or VIGIL_TOKEN)")
	case scopeRefused:
		writeError(w, http.StatusUnauthorized, "token_refused",
			"the API token sent is not this agent's, so it was refused", "check -token or VIGIL_TOKEN against the agent's control { api { token_env | token_file } } (or read_token_env, node_token_env)")
	default:
		writeError(w, http.StatusForbidden, "token_scope",
			fmt.Sprintf("the token sent has the %s scope, which %s; %s %s needs the %s scope", got, got.allows(), r.Method, r.URL.Path, want),
			"send a token of "+want.configuredBy())
	}
}

// read serves next to any token, or to none while reads are open.
func (h *handler) read(next http.HandlerFunc) http.HandlerFunc {
	return h.scoped(ScopeRead, "reads need a token", next)
}

// nodeRead is read for what edge nodes follow: the node scope is enough.
func (h *handler) nodeRead(next http.HandlerFunc) http.HandlerFunc {
	return h.scoped(ScopeNode, "reads need a token", next)
}

func (h *handler) scoped(want Scope, need string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a := h.access.Load(); a.readsNeedToken {
			if got := h.checkToken(r, a); !got.reaches(want) {
				refuseToken(w, r, got, want, need)
				return
			}
		}
		next(w, r)
	}
}

// reload is POST /v1/reload: 200 with what was applied, 422 with the
// reason (the diagnostics of an invalid file) when refused.
func (h *handler) reload(w http.ResponseWriter, _ *http.Request) {
	ans, err := h.Reload()
	if err != nil {
		e, ok := err.(*vapi.Error)
		if !ok {
			e = &vapi.Error{Code: vapi.CodeReloadRefused, Message: err.Error()}
		}
		e.Status = http.StatusUnprocessableEntity
		vapi.WriteError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

func (h *handler) write(next http.HandlerFunc) http.HandlerFunc {
	return h.privileged("changes", "changes need the operator's API token", next)
}

// privileged serves next only with the operator's token: what names the
// requests in an agent without one ("changes"), need says why they need
// it.
func (h *handler) privileged(what, need string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := h.access.Load()
		if a.token == "" {
			writeError(w, http.StatusForbidden, "mutations_disabled",
				"this agent has no operator API token, so it refuses "+what+"; set control { api { token_env = \"VIGIL_TOKEN\" } } (or token_file) and restart")
			return
		}
		if got := h.checkToken(r, a); !got.reaches(ScopeOperator) {
			refuseToken(w, r, got, ScopeOperator, need)
			return
		}
		next(w, r)
	}
}

// MaxPageLimit bounds the limit parameter of GET /v1/sites.
const MaxPageLimit = 10000

// siteFilter is what GET /v1/sites selects.
type siteFilter struct {
	statuses map[string]bool // nil: any
	level    int             // 0: any
	problem  bool
	prefix   string
}

// statuses tells the status of one site after another from a snapshot,
// reusing one buffer (readmodel.SiteState.Status).
type statuses struct {
	v   *engine.Views
	buf readmodel.SiteState
}

func (s *statuses) of(i int) string {
	s.v.State(i, &s.buf)
	return s.buf.Status()
}

func (f *siteFilter) match(st *statuses, i int) bool {
	v := st.v
	if f.prefix != "" && !strings.HasPrefix(v.Name(i), f.prefix) {
		return false
	}
	if f.level != 0 && v.Level(i) != f.level {
		return false
	}
	if f.statuses == nil && !f.problem {
		return true
	}
	return f.matchStatus(st.of(i))
}

func (f *siteFilter) matchStatus(st string) bool {
	if f.problem && !isProblem(st) {
		return false
	}
	return f.statuses == nil || f.statuses[st]
}

// isProblem reports whether a site's status needs an operator's eye.
func isProblem(status string) bool {
	switch status {
	case vapi.StatusDown, vapi.StatusFailedOver, vapi.StatusDegraded, vapi.StatusPaused:
		return true
	}
	return false
}

func parseSiteFilter(r *http.Request) (siteFilter, error) {
	q := r.URL.Query()
	var f siteFilter
	if s := q.Get("status"); s != "" {
		f.statuses = map[string]bool{}
		for _, st := range strings.Split(s, ",") {
			if !slices.Contains(vapi.Statuses, st) {
				return f, fmt.Errorf("status=%q: each status is one of %s", st, strings.Join(vapi.Statuses, ", "))
			}
			f.statuses[st] = true
		}
	}
	if s := q.Get("level"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return f, fmt.Errorf("level=%q is not a level number (1 or more)", s)
		}
		f.level = n
	}
	if s := q.Get("problem"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return f, fmt.Errorf("problem=%q: use true or false", s)
		}
		f.problem = b
	}
	f.prefix = q.Get("prefix")
	return f, nil
}

// sites streams the sites in name order, a page at a time when limit is
// given: the answer's next_cursor, passed back as cursor, continues after
// the page's last site. Without limit every matching site comes in one
// answer. total counts the sites the filters match; counts the whole
// fleet's sites by status. Sites are encoded one at a time, so no call holds a fleet-sized
// buffer; a page comes from one consistent view of the fleet.
func (h *handler) sites(w http.ResponseWriter, r *http.Request) {
	f, err := parseSiteFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageLimit {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit=%q: give a whole number from 1 to %d", s, MaxPageLimit))
			return
		}
		limit = n
	}
	v := h.Engine.Views()
	from := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		after, err := decodeCursor(c)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", err.Error(), "pass back the next_cursor of the previous page as it came")
			return
		}
		from = v.Seek(after)
	}
	total := 0
	counts := make(map[string]int, len(vapi.Statuses))
	for _, st := range vapi.Statuses {
		counts[st] = 0
	}
	sts := &statuses{v: v}
	for i := 0; i < v.Len(); i++ {
		st := sts.of(i)
		counts[st]++
		if (f.prefix == "" || strings.HasPrefix(v.Name(i), f.prefix)) && (f.level == 0 || sts.buf.Level == f.level) && f.matchStatus(st) {
			total++
		}
	}
	countsJSON, _ := json.Marshal(counts)
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	fmt.Fprintf(bw, "{\"round\": %d, \"publication\": %d, \"total\": %d, \"counts\": %s, \"sites\": [", v.Round, v.Publication, total, countsJSON)
	n, last := 0, -1
	for i := from; i < v.Len(); i++ {
		if !f.match(sts, i) {
			continue
		}
		if limit > 0 && n == limit {
			break
		}
		b, err := json.Marshal(readmodel.WithDNSUpdate(readmodel.At(v, i), h.DNSUpdates))
		if err != nil {
			h.Logger.Error("encoding a site", "site", v.Name(i), "error", err)
			return
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n")
		bw.Write(b)
		n++
		last = i
	}
	bw.WriteString("\n]")
	if limit > 0 && last >= 0 {
		for j := last + 1; j < v.Len(); j++ {
			if f.match(sts, j) {
				fmt.Fprintf(bw, ", \"next_cursor\": %q", encodeCursor(v.Name(last)))
				break
			}
		}
	}
	bw.WriteString("}\n")
	_ = bw.Flush()
}

// A cursor is the last site of a page, opaque to clients.
func encodeCursor(site string) string { return base64.RawURLEncoding.EncodeToString([]byte(site)) }

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", fmt.Errorf("cursor=%q is not a cursor this API gave", c)
	}
	return string(b), nil
}

func (h *handler) site(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("site")
	v := readmodel.WithDNSUpdate(readmodel.SiteView(h.Engine.Views(), name), h.DNSUpdates)
	if v == nil {
		writeError(w, http.StatusNotFound, "unknown_site", fmt.Sprintf("no site %s", name), "GET /v1/sites lists the sites")
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func actor(r *http.Request) string {
	a := strings.TrimSpace(r.Header.Get("X-Vigil-Actor"))
	if a == "" || len(a) > 200 || strings.ContainsAny(a, "\r\n") {
		return "api"
	}
	return a
}

type actionResult = vapi.ActionResult

func (h *handler) actionError(w http.ResponseWriter, err error) {
	var ae *engine.ActionError
	if errors.As(err, &ae) {
		status, hint := http.StatusNotFound, ae.Hint
		switch ae.Code {
		case "unknown_level", "no_ramp":
			status = http.StatusBadRequest
		case "last_enabled_origin":
			status = http.StatusConflict
		case "not_saved":
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "5")
		}
		if ae.Code == "unknown_site" {
			hint = "GET /v1/sites lists the sites"
		}
		writeError(w, status, ae.Code, ae.Error(), hint)
		return
	}
	if errors.Is(err, engine.ErrNotActive) {
		writeError(w, http.StatusServiceUnavailable, "not_active", err.Error(), "send changes to the leader (or, sharded, the site's owner): GET /v1/cluster names it")
		return
	}
	h.Logger.Error("action failed", "error", err)
	writeError(w, http.StatusInternalServerError, "internal", err.Error())
}

func (h *handler) switchLevel(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Level *int `json:"level"`
		// Ramp asks for the way back to be ramped, as an automatic failback.
		Ramp bool `json:"ramp"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("the body must be JSON like {\"level\": 2}: %v", err))
		return
	}
	if body.Level == nil {
		writeError(w, http.StatusBadRequest, "bad_request", "the body needs \"level\", such as {\"level\": 2}")
		return
	}
	site := r.PathValue("site")
	switchTo := h.Engine.Switch
	if body.Ramp {
		switchTo = h.Engine.SwitchRamped
	}
	events, err := switchTo(r.Context(), site, *body.Level, actor(r))
	if err != nil {
		h.actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{Site: site, Events: readmodel.Events(events)})
}

func (h *handler) originAction(w http.ResponseWriter, r *http.Request) {
	site, origin, action := r.PathValue("site"), r.PathValue("origin"), r.PathValue("action")
	var events []decide.Event
	var err error
	switch action {
	case "disable":
		force, ferr := forceParam(r)
		if ferr != nil {
			writeError(w, http.StatusBadRequest, "bad_request", ferr.Error())
			return
		}
		events, err = h.Engine.DisableGuarded(r.Context(), site, origin, actor(r), force)
	case "enable":
		events, err = h.Engine.Enable(r.Context(), site, origin, actor(r))
	default:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("unknown origin action %q: use disable or enable", action))
		return
	}
	if err != nil {
		h.actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{Site: site, Events: readmodel.Events(events)})
}

type drainKey struct{}

// WithDrain returns ctx carrying drain, for an http.Server's BaseContext:
// the long polls of the requests it serves (GET /v1/events and GET
// /v1/publication with a wait) answer at once, as when their wait ends,
// once drain is closed. A server closes it as it shuts down
// (RegisterOnShutdown), so that Shutdown does not wait out the polls of
// the nodes that follow the publication.
func WithDrain(ctx context.Context, drain <-chan struct{}) context.Context {
	return context.WithValue(ctx, drainKey{}, drain)
}

// pollContext is the context of a long poll of wait: done at the end of
// the wait, of the request, or when the server drains.
func pollContext(r *http.Request, wait time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	if drain, ok := r.Context().Value(drainKey{}).(<-chan struct{}); ok {
		go func() {
			select {
			case <-drain:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// forceParam reads ?force=true, or {"force": true} in the body, of an
// origin action.
func forceParam(r *http.Request) (bool, error) {
	force := false
	if s := r.URL.Query().Get("force"); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return false, fmt.Errorf("force=%q: give true or false", s)
		}
		force = v
	}
	var body struct {
		Force *bool `json:"force"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	switch err := dec.Decode(&body); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return false, fmt.Errorf("the body must be empty, {}, or {\"force\": true}: %v", err)
	case body.Force != nil:
		force = force || *body.Force
	}
	return force, nil
}

func (h *handler) waitParam(r *http.Request, def time.Duration) (time.Duration, error) {
	s := r.URL.Query().Get("wait")
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, err2 := strconv.Atoi(s); err2 == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil || d < 0 {
		return 0, fmt.Errorf("wait=%q is not a duration such as 30s", s)
	}
	if d > h.MaxWait {
		d = h.MaxWait
	}
	return d, nil
}

func uintParam(r *http.Request, name string) (uint64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a non-negative whole number", name, s)
	}
	return n, nil
}

// EventLine is one event as the API shows it.
type EventLine = vapi.EventLine

func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	after, err := uintParam(r, "after")
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	limit, err := uintParam(r, "limit")
	if err != nil || limit > 10000 {
		writeError(w, http.StatusBadRequest, "bad_request", "limit must be a whole number from 1 to 10000")
		return
	}
	if limit == 0 {
		limit = 100
	}
	wait, err := h.waitParam(r, 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	site := r.URL.Query().Get("site")
	if site != "" && !h.Engine.Views().Has(site) {
		writeError(w, http.StatusNotFound, "unknown_site", fmt.Sprintf("no site %s", site), "GET /v1/sites lists the sites")
		return
	}
	ctx, cancel := pollContext(r, wait)
	defer cancel()
	for {
		changed := h.Engine.JournalChanged()
		evs, err := h.Engine.Events(r.Context(), after, site, int(limit))
		if err != nil {
			writeError(w, http.StatusInternalServerError, "store", err.Error())
			return
		}
		if len(evs) > 0 || wait == 0 {
			writeJSON(w, http.StatusOK, map[string]any{"events": lines(evs)})
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			writeJSON(w, http.StatusOK, map[string]any{"events": []EventLine{}})
			return
		}
	}
}

func lines(evs []store.Event) []EventLine {
	out := make([]EventLine, len(evs))
	for i, e := range evs {
		out[i] = EventLine{Seq: e.Seq, Time: e.Time, Site: e.Site, Round: e.Round, Actor: e.Actor, Event: readmodel.Event(e.Event)}
	}
	return out
}

func (h *handler) publication(w http.ResponseWriter, r *http.Request) {
	after, err := uintParam(r, "after")
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	wait, err := h.waitParam(r, 30*time.Second)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	// A follower ahead of this control plane holds a version from another
	// history (a control plane restored from an empty store): it gets the
	// current snapshot at once rather than waiting for the numbers to catch
	// up.
	if cur := h.Engine.Hub().Current(); after > cur.Version && cur.Version > 0 {
		w.Header().Set("X-Vigil-Publication", strconv.FormatUint(cur.Version, 10))
		writeJSON(w, http.StatusOK, cur)
		return
	}
	ctx, cancel := pollContext(r, wait)
	defer cancel()
	snap, ok := h.Engine.Hub().Wait(ctx, after)
	if !ok {
		w.Header().Set("X-Vigil-Publication", strconv.FormatUint(snap.Version, 10))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("X-Vigil-Publication", strconv.FormatUint(snap.Version, 10))
	writeJSON(w, http.StatusOK, snap)
}

// nodes lists what the sources report about themselves, chiefly the node
// gateway's nodes: "nodes" are the online ones, "offline" the others. 404
// when no source reports a status (no node source configured).
func (h *handler) nodes(w http.ResponseWriter, r *http.Request) {
	statuses := readmodel.SourceStatuses(h.Engine.SourceReports(r.Context()))
	if len(statuses) == 0 {
		writeError(w, http.StatusNotFound, "no_status", "no vote source reports nodes (configure a node source, vigil-source-node)")
		return
	}
	out := vapi.NodesAnswer{Nodes: []vapi.NodeView{}, Offline: []vapi.NodeView{}, Sources: statuses}
	for _, s := range statuses {
		for _, n := range s.Items {
			if n.State == "online" {
				out.Nodes = append(out.Nodes, n)
			} else {
				out.Offline = append(out.Offline, n)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// probe runs one dry-run round for a site through the agent's own sources.
// It changes nothing, but it does send probes, so it needs the token.
func (h *handler) probe(w http.ResponseWriter, r *http.Request) {
	res, err := h.Engine.ProbeSite(r.Context(), r.PathValue("site"))
	if err != nil {
		h.actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
