package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	vapi "github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/fleet"
)

// drillRoutes serves the failover drills (docs/drills.md): POST starts
// one and DELETE aborts it (the operator's token; an HA standby answers
// 421 with the leader, as for every change), GET shows it.
func (h *handler) drillRoutes() {
	h.mux.HandleFunc("POST /v1/sites/{site}/drill", h.write(h.startDrill))
	h.mux.HandleFunc("DELETE /v1/sites/{site}/drill", h.write(h.abortDrill))
	h.mux.HandleFunc("GET /v1/sites/{site}/drill", h.read(h.getDrill))
}

func (h *handler) startDrill(w http.ResponseWriter, r *http.Request) {
	var body vapi.DrillRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("the body must be JSON like {\"level\": 1, \"for\": \"5m\"} (both optional): %v", err))
		return
	}
	req := engine.DrillRequest{Level: body.Level}
	if body.Level < 0 {
		writeError(w, http.StatusBadRequest, "unknown_level", fmt.Sprintf("level %d is not a level number", body.Level), "give a level of the site, or none for its current level")
		return
	}
	if body.For != "" {
		d, err := time.ParseDuration(body.For)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, "bad_duration", fmt.Sprintf("\"for\": %q is not a positive duration", body.For),
				"give a Go duration such as \"5m\" or \"90s\", at most "+engine.MaxDrill.String())
			return
		}
		req.For = d
	}
	d, err := h.Engine.StartDrill(r.Context(), r.PathValue("site"), req, actor(r))
	if err != nil {
		h.drillError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (h *handler) abortDrill(w http.ResponseWriter, r *http.Request) {
	d, err := h.Engine.AbortDrill(r.Context(), r.PathValue("site"), actor(r))
	if err != nil {
		h.drillError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (h *handler) getDrill(w http.ResponseWriter, r *http.Request) {
	site := r.PathValue("site")
	d, err := h.Engine.Views().Drill(site)
	var us fleet.ErrUnknownSite
	switch {
	case errors.As(err, &us):
		writeError(w, http.StatusNotFound, "unknown_site", err.Error(), "GET /v1/sites lists the sites")
	case errors.Is(err, engine.ErrNoDrill):
		writeError(w, http.StatusNotFound, "no_drill", fmt.Sprintf("site %s has no drill running or on its way back", site), "start one with vigil drill "+site)
	default:
		writeJSON(w, http.StatusOK, d)
	}
}

// drillError answers a refused drill: a conflict with the site's state is
// 409, a bad request 400, the rest as any action's refusal.
func (h *handler) drillError(w http.ResponseWriter, err error) {
	var ae *engine.ActionError
	if errors.As(err, &ae) {
		switch ae.Code {
		case "drill_running", "site_paused", "manual_hold", "no_healthy_level", "drill_source_name":
			writeError(w, http.StatusConflict, ae.Code, ae.Error(), ae.Hint)
			return
		case "bad_duration":
			writeError(w, http.StatusBadRequest, ae.Code, ae.Error(), ae.Hint)
			return
		case "no_drill":
			writeError(w, http.StatusNotFound, ae.Code, ae.Error(), ae.Hint)
			return
		}
	}
	h.actionError(w, err)
}
