package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	vapi "github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/readmodel"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// maxFailoverLimit caps ?limit= of GET /v1/sites/{site}/failovers, and
// defaultFailoverLimit is its default.
const (
	defaultFailoverLimit = 10
	maxFailoverLimit     = 100
)

// failoverRoutes registers the failover reports' routes:
//
//	GET  /v1/sites/{site}/failovers?limit=N   the site's failover reports, newest first (read scope)
//	POST /v1/publication/applied              a node's acknowledgement of a publication version (node scope)
func (h *handler) failoverRoutes() {
	h.mux.HandleFunc("GET /v1/sites/{site}/failovers", h.read(h.failovers))
	h.mux.HandleFunc("POST /v1/publication/applied", h.nodeRead(h.applied))
}

func (h *handler) failovers(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("site")
	if readmodel.SiteView(h.Engine.Views(), name) == nil {
		writeError(w, http.StatusNotFound, "unknown_site", fmt.Sprintf("no site %s", name), "GET /v1/sites lists the sites")
		return
	}
	limit := defaultFailoverLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := uintParam(r, "limit")
		if err != nil || n == 0 || n > maxFailoverLimit {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit=%q is not a whole number from 1 to %d", s, maxFailoverLimit))
			return
		}
		limit = int(n)
	}
	reps, err := h.Engine.FailoverReports(r.Context(), name, limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, vapi.FailoverReportList{Site: name, Failovers: reps})
}

// applied takes a node's acknowledgement: the time its edge applied a
// publication version, and what it saw of the levels that version made
// it leave. It moves no traffic, so the node scope may send it.
func (h *handler) applied(w http.ResponseWriter, r *http.Request) {
	var a publication.Applied
	dec := json.NewDecoder(io.LimitReader(r.Body, 8<<20))
	if err := dec.Decode(&a); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "the body is not a publication acknowledgement (sdk/publication.Applied): "+err.Error())
		return
	}
	switch {
	case strings.TrimSpace(a.Node) == "":
		writeError(w, http.StatusBadRequest, "bad_request", `the acknowledgement has no "node": give vigil-node an -id`)
		return
	case a.Version == 0:
		writeError(w, http.StatusBadRequest, "bad_request", `the acknowledgement has no "version"`)
		return
	case a.At.IsZero():
		a.At = time.Now()
	}
	h.Engine.FailoverApplied(a)
	w.WriteHeader(http.StatusNoContent)
}
