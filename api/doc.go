// Package api is vigil's HTTP API as Go: the types of its requests and
// answers, its one error type, and a typed client. The CLI, the agent's
// server (core/httpapi), the HA layer and the tests all use these types, so
// that the wire format has one definition.
//
// It imports nothing from core/ (a test holds it to that), only the
// publication snapshot (sdk/publication): the events it carries are its
// own Event, the wire form of the decision core's events, which the
// server converts (core/readmodel). A program that talks to an
// agent can import it without pulling in the control plane.
//
//	c := api.NewClient("http://127.0.0.1:8470", os.Getenv("VIGIL_TOKEN"))
//	site, err := c.Site(ctx, "www")
//	var apiErr *api.Error
//	if errors.As(err, &apiErr) && apiErr.Code == api.CodeUnknownSite { ... }
//
// docs/api.md describes every route.
package api
