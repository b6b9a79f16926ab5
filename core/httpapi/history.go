package httpapi

import (
	"fmt"
	"net/http"

	"github.com/vigilcdn/vigil/core/readmodel"
)

// history answers GET /v1/sites/{site}/history from the history feed: a
// site's recent verdicts and uptimes, read from the history file for this
// one site. Without a feed (an etcd store) the answer says no history is
// kept.
func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("site")
	if h.History == nil && !h.Engine.Views().Has(name) {
		writeError(w, http.StatusNotFound, "unknown_site", fmt.Sprintf("no site %s", name), "GET /v1/sites lists the sites")
		return
	}
	out, err := h.History.SiteHistory(name)
	if err != nil {
		h.Logger.Error("reading the history", "site", name, "error", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	if out == nil {
		writeError(w, http.StatusNotFound, "unknown_site", fmt.Sprintf("no site %s", name), "GET /v1/sites lists the sites")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// summary answers GET /v1/summary: the fleet in a few numbers.
func (h *handler) summary(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, readmodel.Summary(h.Engine.Views()))
}
