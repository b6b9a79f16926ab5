package httpapi

import (
	"net/http"

	vapi "github.com/vigilcdn/vigil/api"
)

// sources answers GET /v1/sources: the chain's sources in order, each with
// its plugin (name, version, protocol, SDK, capabilities), its process and
// its counters and latest failure. `vigil plugin list` prints it.
func (h *handler) sources(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, vapi.SourcesAnswer{Sources: h.Engine.Sources()})
}
