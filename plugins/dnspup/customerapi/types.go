package customerapi

// ProbeRequest is the body of POST /v1/probes.
type ProbeRequest struct {
	// Type is the probe kind; this client uses "http".
	Type string `json:"type"`
	// Target is the URL the checkpoints fetch.
	Target string `json:"target"`
	// IPVersion is "4" or "6".
	IPVersion string `json:"ipVersion,omitempty"`
	// Count is the number of probes per checkpoint.
	Count int `json:"count,omitempty"`
	// Method is the HTTP method, "GET".
	Method string `json:"method,omitempty"`
	// NodeIDs are the checkpoints to probe from; empty lets dnspup choose.
	NodeIDs []string `json:"nodeIds,omitempty"`
}

// BatchProbeRequest is the body of POST /v1/batch-probes. The fields other
// than Targets are assumed to mean what they mean for ProbeRequest.
type BatchProbeRequest struct {
	Type      string   `json:"type"`
	Targets   []string `json:"targets"`
	IPVersion string   `json:"ipVersion,omitempty"`
	Count     int      `json:"count,omitempty"`
	Method    string   `json:"method,omitempty"`
	NodeIDs   []string `json:"nodeIds,omitempty"`
}

// Node is one dnspup probe node (a checkpoint) as listed by GET /v1/nodes.
// Only ID is required; the rest is descriptive and may be empty.
type Node struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Country  string `json:"country,omitempty"`
	City     string `json:"city,omitempty"`
	Provider string `json:"provider,omitempty"`
	// Online is false only when the API says so explicitly.
	Online bool `json:"online"`
}
