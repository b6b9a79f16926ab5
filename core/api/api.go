package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/store"
)

// Options configure the API handler.
type Options struct {
	Engine *engine.Engine
	// Token is the bearer token; empty disables mutations.
	Token string
	// ReadsNeedToken makes reads need the token too.
	ReadsNeedToken bool
	// Gatherer serves /metrics (prometheus.DefaultGatherer when nil).
	Gatherer prometheus.Gatherer
	Logger   hclog.Logger
	// MaxWait caps the wait of long-polls (default 2 minutes).
	MaxWait time.Duration
	// Extra registers more handlers on the mux (the status page).
	Extra func(mux *http.ServeMux)
}

type handler struct {
	Options
	mux *http.ServeMux
}

// New returns the API's http.Handler.
func New(opts Options) http.Handler {
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
	h.mux.HandleFunc("GET /v1/sites", h.read(h.sites))
	h.mux.HandleFunc("GET /v1/sites/{site}", h.read(h.site))
	h.mux.HandleFunc("POST /v1/sites/{site}/switch", h.write(h.switchLevel))
	h.mux.HandleFunc("POST /v1/sites/{site}/probe", h.write(h.probe))
	h.mux.HandleFunc("POST /v1/sites/{site}/origins/{origin}/{action}", h.write(h.originAction))
	h.mux.HandleFunc("GET /v1/events", h.read(h.events))
	h.mux.HandleFunc("GET /v1/publication", h.read(h.publication))
	h.mux.HandleFunc("GET /v1/nodes", h.read(h.nodes))
	h.mux.Handle("GET /metrics", h.read(promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}).ServeHTTP))
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
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// APIError is the JSON error body.
type APIError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Hint    string `json:"hint,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string, hint ...string) {
	var e APIError
	e.Error.Code, e.Error.Message = code, msg
	if len(hint) > 0 {
		e.Error.Hint = hint[0]
	}
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// authorized checks the bearer token in constant time.
func (h *handler) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && h.Token != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(h.Token)) == 1
}

func (h *handler) read(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.ReadsNeedToken && !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "reads need the API token: send Authorization: Bearer TOKEN (vigil -token or VIGIL_TOKEN)")
			return
		}
		next(w, r)
	}
}

func (h *handler) write(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.Token == "" {
			writeError(w, http.StatusForbidden, "mutations_disabled",
				"this agent has no API token, so it refuses every change; set control { api { token_env = \"VIGIL_TOKEN\" } } (or token_file) and restart")
			return
		}
		if !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "changes need the API token: send Authorization: Bearer TOKEN (vigil -token or VIGIL_TOKEN)")
			return
		}
		next(w, r)
	}
}

func (h *handler) sites(w http.ResponseWriter, _ *http.Request) {
	v := h.Engine.Views()
	out := struct {
		Round       uint64             `json:"round"`
		Publication uint64             `json:"publication"`
		Sites       []*engine.SiteView `json:"sites"`
	}{Round: v.Round, Publication: v.Publication, Sites: []*engine.SiteView{}}
	for _, n := range v.Names {
		out.Sites = append(out.Sites, v.Sites[n])
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) site(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("site")
	v := h.Engine.Views().Sites[name]
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

type actionResult struct {
	Site   string         `json:"site"`
	Events []decide.Event `json:"events"`
}

func (h *handler) actionError(w http.ResponseWriter, err error) {
	var ae *engine.ActionError
	if errors.As(err, &ae) {
		status, hint := http.StatusNotFound, ae.Hint
		if ae.Code == "unknown_level" {
			status = http.StatusBadRequest
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
	events, err := h.Engine.Switch(r.Context(), site, *body.Level, actor(r))
	if err != nil {
		h.actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{Site: site, Events: events})
}

func (h *handler) originAction(w http.ResponseWriter, r *http.Request) {
	site, origin, action := r.PathValue("site"), r.PathValue("origin"), r.PathValue("action")
	var events []decide.Event
	var err error
	switch action {
	case "disable":
		events, err = h.Engine.Disable(r.Context(), site, origin, actor(r))
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
	writeJSON(w, http.StatusOK, actionResult{Site: site, Events: events})
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
type EventLine struct {
	Seq   uint64       `json:"seq"`
	Time  time.Time    `json:"time"`
	Site  string       `json:"site"`
	Round uint64       `json:"round,omitempty"`
	Actor string       `json:"actor,omitempty"`
	Event decide.Event `json:"event"`
}

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
	if site != "" && h.Engine.Views().Sites[site] == nil {
		writeError(w, http.StatusNotFound, "unknown_site", fmt.Sprintf("no site %s", site), "GET /v1/sites lists the sites")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
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
		out[i] = EventLine{Seq: e.Seq, Time: e.Time, Site: e.Site, Round: e.Round, Actor: e.Actor, Event: e.Event}
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
	ctx, cancel := context.WithTimeout(r.Context(), wait)
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
	statuses := h.Engine.SourceStatuses(r.Context())
	if len(statuses) == 0 {
		writeError(w, http.StatusNotFound, "no_status", "no vote source reports nodes (configure a node source, vigil-source-node)")
		return
	}
	out := struct {
		Nodes   []engine.NodeView     `json:"nodes"`
		Offline []engine.NodeView     `json:"offline"`
		Sources []engine.SourceStatus `json:"sources"`
	}{Nodes: []engine.NodeView{}, Offline: []engine.NodeView{}, Sources: statuses}
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
