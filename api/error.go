package api

import (
	"encoding/json"
	"net/http"
)

// Error is every error the API answers, and what the Client returns for
// one: the HTTP status, a stable code to branch on, a message for people,
// and a hint that names the way out.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

func (e *Error) Error() string {
	if e.Hint != "" {
		return e.Message + " (" + e.Hint + ")"
	}
	return e.Message
}

// The error codes a client may branch on (docs/api.md lists them all).
const (
	CodeBadRequest        = "bad_request"
	CodeNotFound          = "not_found"
	CodeUnknownSite       = "unknown_site"
	CodeUnknownOrigin     = "unknown_origin"
	CodeUnknownLevel      = "unknown_level"
	CodeLastEnabledOrigin = "last_enabled_origin"
	CodeNoRamp            = "no_ramp"
	CodeReloadRefused     = "reload_refused"
	CodeTokenMissing      = "token_missing"
	CodeTokenRefused      = "token_refused"
	CodeMutationsDisabled = "mutations_disabled"
	CodeNotLeader         = "not_leader"
	CodeNotActive         = "not_active"
	CodeNotSaved          = "not_saved"
	CodeNoStatus          = "no_status"
	CodeStore             = "store"
	CodeInternal          = "internal"
)

// errorBody is the JSON of an Error: {"error": {...}}.
type errorBody struct {
	Error *Error `json:"error"`
}

// WriteError answers with e as JSON, with the status e.Status.
func WriteError(w http.ResponseWriter, e *Error) {
	WriteJSON(w, e.Status, errorBody{Error: e})
}

// WriteJSON answers v as indented JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
