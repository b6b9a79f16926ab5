package dnspup

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/sdk"
)

// Defaults of the config attributes.
const (
	DefaultAPIKeyEnv        = "DNSPUP_API_KEY"
	DefaultAPISecretEnv     = "DNSPUP_API_SECRET"
	DefaultCheckpointCount  = 3
	DefaultIPVersion        = "4"
	DefaultRequestTimeout   = 8 * time.Second
	DefaultRequestsPerRound = 10
	DefaultConcurrency      = 2
	DefaultBatchSize        = 10
	DefaultQuotaBackoff     = time.Hour
	// DefaultRateLimitWait is the hold after a rate limit without Retry-After.
	DefaultRateLimitWait = 30 * time.Second
)

// schema is the source's `config { }` block.
var schema = sdk.Schema{Attributes: []sdk.Attribute{
	{Name: "api_base", Type: sdk.TypeString, Description: "dnspup Customer API root URL (default " + customerapi.DefaultBaseURL + ")."},
	{Name: "api_key_env", Type: sdk.TypeString, Description: "Name of the environment variable holding the dnspup API key (default " + DefaultAPIKeyEnv + "); list it in the source's env."},
	{Name: "api_secret_env", Type: sdk.TypeString, Description: "Name of the environment variable holding the dnspup API secret (default " + DefaultAPISecretEnv + "); list it in the source's env."},
	{Name: "checkpoints", Type: sdk.TypeStringList, Description: "dnspup node ids that vote, one vote each per origin; conflicts with checkpoint_count."},
	{Name: "checkpoint_count", Type: sdk.TypeNumber, Description: "How many dnspup nodes vote when checkpoints is not set (default 3), picked from GET /v1/nodes."},
	{Name: "ip_version", Type: sdk.TypeString, Description: "IP version the checkpoints use: \"4\" (default) or \"6\"."},
	{Name: "request_timeout", Type: sdk.TypeDuration, Description: "Deadline of one dnspup API request (default 8s), shortened to fit the round's deadline."},
	{Name: "requests_per_round", Type: sdk.TypeNumber, Description: "Most dnspup API requests per round (default 10); targets beyond it abstain (over_budget), different ones each round."},
	{Name: "concurrency", Type: sdk.TypeNumber, Description: "Most dnspup API requests in flight at once (default 2)."},
	{Name: "batch_size", Type: sdk.TypeNumber, Description: "Most targets in one batch-probes request (default 10); 1 sends one POST /v1/probes per target."},
	{Name: "quota_backoff", Type: sdk.TypeDuration, Description: "How long to stop calling after quota_exceeded (default 1h)."},
}}

// settings is a checked configuration.
type settings struct {
	APIBase          string
	APIKeyEnv        string
	APISecretEnv     string
	Checkpoints      []string // as configured; nil when checkpoint_count is used
	CheckpointCount  int
	IPVersion        string
	RequestTimeout   time.Duration
	RequestsPerRound int
	Concurrency      int
	BatchSize        int
	QuotaBackoff     time.Duration
}

// parseSettings applies defaults and checks every attribute that can be
// checked without the network.
func parseSettings(cfg sdk.Config) (settings, sdk.Diagnostics) {
	var diags sdk.Diagnostics
	s := settings{
		APIBase:          customerapi.DefaultBaseURL,
		APIKeyEnv:        DefaultAPIKeyEnv,
		APISecretEnv:     DefaultAPISecretEnv,
		CheckpointCount:  DefaultCheckpointCount,
		IPVersion:        DefaultIPVersion,
		RequestTimeout:   DefaultRequestTimeout,
		RequestsPerRound: DefaultRequestsPerRound,
		Concurrency:      DefaultConcurrency,
		BatchSize:        DefaultBatchSize,
		QuotaBackoff:     DefaultQuotaBackoff,
	}
	if v, ok := cfg.String("api_base"); ok {
		s.APIBase = strings.TrimSpace(v)
		u, err := url.Parse(s.APIBase)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			diags = append(diags, sdk.AttributeError("api_base", "api_base is not an absolute http or https URL",
				"Use the API root, for example "+customerapi.DefaultBaseURL+"."))
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			diags = append(diags, sdk.AttributeError("api_base", "api_base must not carry credentials, a query or a fragment",
				"Put the credentials in environment variables named by api_key_env and api_secret_env."))
		}
	}
	for _, a := range []struct {
		name string
		dst  *string
	}{{"api_key_env", &s.APIKeyEnv}, {"api_secret_env", &s.APISecretEnv}} {
		if v, ok := cfg.String(a.name); ok {
			*a.dst = strings.TrimSpace(v)
			if !envName(*a.dst) {
				diags = append(diags, sdk.AttributeError(a.name, a.name+" is not an environment variable name",
					fmt.Sprintf("Give the name of the variable (such as %q), not its value: letters, digits and underscores, not starting with a digit.", DefaultAPIKeyEnv)))
			}
		}
	}
	ids, hasIDs := cfg.Strings("checkpoints")
	n, hasCount := cfg.Number("checkpoint_count")
	switch {
	case hasIDs && hasCount:
		diags = append(diags, sdk.AttributeError("checkpoint_count", "checkpoints and checkpoint_count are both set",
			"Set checkpoints to choose the nodes, or checkpoint_count to let the plugin pick that many; not both."))
	case hasIDs:
		if len(ids) == 0 {
			diags = append(diags, sdk.AttributeError("checkpoints", "checkpoints is empty",
				"List at least one dnspup node id, or remove checkpoints and set checkpoint_count."))
		}
		seen := map[string]bool{}
		for i, id := range ids {
			id = strings.TrimSpace(id)
			switch {
			case id == "":
				diags = append(diags, sdk.ElementError("checkpoints", i, "empty checkpoint id", "Remove the empty string."))
			case seen[id]:
				diags = append(diags, sdk.ElementError("checkpoints", i, fmt.Sprintf("checkpoint %q is listed twice", id),
					"Each checkpoint votes once; remove the duplicate."))
			}
			seen[id] = true
			s.Checkpoints = append(s.Checkpoints, id)
		}
		s.CheckpointCount = len(s.Checkpoints)
	case hasCount:
		if d := wholeInRange("checkpoint_count", n, 1, 100); d != nil {
			diags = append(diags, *d)
		}
		s.CheckpointCount = int(n)
	}
	if v, ok := cfg.String("ip_version"); ok {
		s.IPVersion = strings.TrimSpace(v)
		if s.IPVersion != "4" && s.IPVersion != "6" {
			diags = append(diags, sdk.AttributeError("ip_version", fmt.Sprintf("ip_version %q is not \"4\" or \"6\"", v),
				"Write ip_version = \"4\" or ip_version = \"6\" (a string)."))
		}
	}
	if v, ok := cfg.Duration("request_timeout"); ok {
		s.RequestTimeout = v
	}
	if v, ok := cfg.Duration("quota_backoff"); ok {
		s.QuotaBackoff = v
	}
	for _, a := range []struct {
		name   string
		dst    *int
		lo, hi float64
	}{
		{"requests_per_round", &s.RequestsPerRound, 1, 10000},
		{"concurrency", &s.Concurrency, 1, 64},
		{"batch_size", &s.BatchSize, 1, 1000},
	} {
		if v, ok := cfg.Number(a.name); ok {
			if d := wholeInRange(a.name, v, a.lo, a.hi); d != nil {
				diags = append(diags, *d)
				continue
			}
			*a.dst = int(v)
		}
	}
	return s, diags
}

func wholeInRange(name string, v, lo, hi float64) *sdk.Diagnostic {
	if v != math.Trunc(v) || v < lo || v > hi {
		d := sdk.AttributeError(name, fmt.Sprintf("%s = %v is out of range", name, v),
			fmt.Sprintf("Use a whole number from %v to %v.", lo, hi))
		return &d
	}
	return nil
}

func envName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
