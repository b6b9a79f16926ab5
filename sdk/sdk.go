package sdk

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/sdk/internal/glue"
)

// ProtocolVersion is the version of the vote-source protocol a plugin built
// with this SDK serves. vigil and the plugin agree on it during the
// go-plugin handshake: the host offers every version it speaks, the plugin
// serves this one, and a host that does not speak it refuses the plugin
// with a message saying which versions each side speaks. sdk/PROTOCOL.md
// states which hosts speak which versions, and for how long.
const ProtocolVersion = glue.ProtocolVersion

// Version is this SDK's version. A plugin reports it to vigil (Info's
// SDKVersion, filled by the SDK) and operators see it in `vigil plugin list`.
const Version = glue.SDKVersion

// BasePlugin is the part of the protocol every vigil plugin kind shares:
// identity, configuration schema and configuration. Plugin kinds (such as
// [VoteSource]) embed it.
type BasePlugin interface {
	// Info names the plugin and declares its capabilities. vigil calls it
	// first, right after each start, and logs the answer. The SDK fills
	// Info.ProtocolVersion and Info.SDKVersion itself.
	Info(ctx context.Context) (Info, error)

	// ConfigSchema declares the attributes the plugin accepts in the
	// source's `config { }` block. vigil decodes the block against it and
	// reports unknown attributes, missing required ones and type mismatches
	// at file:line:col. Return an empty Schema if the plugin takes no
	// configuration: any attribute in the block is then an error.
	ConfigSchema(ctx context.Context) (Schema, error)

	// Configure hands the plugin its decoded configuration, once after each
	// start of the process and before any Vote. Check the values here.
	// Return [Diagnostics] (for example built with [AttributeError]) to point
	// the operator at the attributes at fault; any other error is shown at
	// the config block as a whole. A plugin that fails Configure is not used.
	Configure(ctx context.Context, cfg Config) error
}

// VoteSource is a vote-source plugin: one link of vigil's vote chain.
//
// # Settle or pass on
//
// Sources are asked in the order the operator declared them. For each round,
// Vote receives every origin that is still unsettled and that the operator
// handed to this source; an origin settled by an earlier source is never
// passed to a later one. For each target, the source either casts votes
// (any number, each Up or Down, from one or more voters) or casts none.
//
// vigil then tallies per origin: with n votes (this source's alone, or every
// vote of the round so far when the operator set `tally = "carry"`), the
// origin is settled Up if n >= min_votes and a strict majority is Up, settled
// Down if n >= min_votes and a strict majority is Down, and otherwise passed
// on to the next source. An origin still unsettled after the last source gets
// no verdict this round and its health does not change.
//
// # No votes = abstain
//
// Returning no vote for a target abstains: it is the right answer whenever
// the source cannot tell (no node in range, an upstream API without data).
// Never vote Down to mean "I do not know": a Down vote counts toward failing
// the origin over. Returning an error, timing out or crashing also counts as
// abstaining on the whole ballot, and is logged and counted as a failure.
//
// # Rules for an answer
//
//   - Every vote names a Site and Origin that were in the ballot; votes for
//     anything else are dropped.
//   - Value is [Up], [Down] or [Abstain]; any other value is dropped. An
//     Abstain needs a Reason saying why and is never tallied.
//   - Voter is 1 to 128 characters of letters, digits and "._:-@/"; it names
//     who looked (a node, a checkpoint, "direct") so that operators can see
//     it in `vigil probe`. Votes with another voter id are dropped.
//   - Vote must return before ctx is done. vigil cancels the call at the
//     deadline and uses none of its votes.
//   - Vote may be called again only after the previous call returned; it
//     need not be safe for concurrent use.
type VoteSource interface {
	BasePlugin

	// Vote judges every target of the ballot and returns the votes cast.
	// See the type's documentation for the contract.
	Vote(ctx context.Context, ballot Ballot) ([]Vote, error)
}

// Info identifies a plugin.
type Info struct {
	// Name is the plugin's name, for example "vigil-source-tcp".
	Name string
	// Version is the plugin's own version, free form ("1.4.2").
	Version string
	// ProtocolVersion is the vote-source protocol version. The SDK sets it;
	// plugin code leaves it zero. On the host's side it is the version the
	// handshake agreed on.
	ProtocolVersion int
	// Capabilities declares what the plugin does with the target settings
	// that only some plugins honour, and what it answers: the Capability
	// constants, such as [CapabilityCABundle]. vigil never hands the plugin a
	// target that needs a capability it did not declare (see
	// [RequiredCapabilities]); it casts an Abstain vote for the plugin
	// instead, and `vigil validate` warns of it at the source's block.
	// Declare only what the code does: a plugin that ignores a setting it
	// declared votes on a check it did not make.
	Capabilities []string
	// SDKVersion is the version of the SDK the plugin was built with. The
	// SDK sets it ([Version]); plugin code leaves it empty.
	SDKVersion string
}

// Has reports whether the plugin declared capability c.
func (i Info) Has(c string) bool {
	for _, x := range i.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// Type is the type of a configuration attribute.
type Type int

// The attribute types a plugin can declare in its [Schema].
const (
	// TypeString is an HCL string.
	TypeString Type = iota + 1
	// TypeNumber is an HCL number; read it with [Config.Number] or [Config.Int].
	TypeNumber
	// TypeBool is an HCL bool.
	TypeBool
	// TypeStringList is a list of strings, for example ["a", "b"].
	TypeStringList
	// TypeDuration is a string in Go duration syntax ("5s", "1m30s") that
	// vigil parses and checks to be > 0 for you; read it with [Config.Duration].
	TypeDuration
)

// String returns the type's name as shown in error messages.
func (t Type) String() string {
	switch t {
	case TypeString:
		return "string"
	case TypeNumber:
		return "number"
	case TypeBool:
		return "bool"
	case TypeStringList:
		return "list of string"
	case TypeDuration:
		return "duration"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// MarshalText gives the type's token in a plugin's -schema JSON: "string",
// "number", "bool", "string_list" or "duration".
func (t Type) MarshalText() ([]byte, error) {
	if t < TypeString || t > TypeDuration {
		return nil, fmt.Errorf("sdk: invalid attribute type %d", int(t))
	}
	return []byte(typeTokens[t]), nil
}

// UnmarshalText reads a token written by MarshalText.
func (t *Type) UnmarshalText(b []byte) error {
	for i, tok := range typeTokens {
		if i > 0 && tok == string(b) {
			*t = Type(i)
			return nil
		}
	}
	return fmt.Errorf("sdk: unknown attribute type %q", b)
}

var typeTokens = [...]string{"", "string", "number", "bool", "string_list", "duration"}

// Schema declares the attributes of a plugin's `config { }` block.
// vigil and package sdktest refuse a schema that [Schema.Validate] refuses.
type Schema struct {
	// Attributes lists the accepted attributes, in the order the generated
	// docs list them. Names are unique HCL identifiers.
	Attributes []Attribute `json:"attributes"`
}

// Attribute declares one attribute of the config block.
type Attribute struct {
	// Name is the attribute's name in HCL, for example "concurrency": a
	// letter or "_", then letters, digits, "_" or "-", at most 64 in all.
	Name string `json:"name"`
	// Type is the attribute's type; the operator's value is converted to it
	// or reported as an error at its file:line:col.
	Type Type `json:"type"`
	// Required makes vigil refuse a config block without this attribute.
	Required bool `json:"required,omitempty"`
	// Description says what the attribute does, for operators: what it
	// means, its default, its unit. It is the attribute's entry in the
	// plugin's configuration reference (`vigil plugin docs PLUGIN` renders
	// it), so write it for someone who has not read the plugin's code.
	Description string `json:"description,omitempty"`
}

// Validate returns an error naming every problem of the schema, or nil: an
// attribute without a name, a name that is not an HCL identifier, a name
// declared twice (the operator could not tell which one a value sets), or a
// type that is not one of the Type constants. vigil refuses to use a plugin
// whose schema is invalid, and sdktest fails the test.
func (s Schema) Validate() error {
	var problems []string
	seen := make(map[string]bool, len(s.Attributes))
	for i, a := range s.Attributes {
		switch {
		case a.Name == "":
			problems = append(problems, fmt.Sprintf("attribute %d has no name", i))
		case !validIdentifier(a.Name):
			problems = append(problems, fmt.Sprintf("attribute %d: name %q is not an HCL identifier (a letter or _, then letters, digits, _ or -; at most 64)", i, clipID(a.Name)))
		case seen[a.Name]:
			problems = append(problems, fmt.Sprintf("attribute %d: name %q is declared twice", i, a.Name))
		}
		seen[a.Name] = true
		if a.Type < TypeString || a.Type > TypeDuration {
			problems = append(problems, fmt.Sprintf("attribute %q has no valid type (%v): set Type to one of the sdk.Type constants", a.Name, a.Type))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("invalid config schema: %s", strings.Join(problems, "; "))
}

func validIdentifier(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Config holds the operator's configuration, decoded by vigil against the
// plugin's [Schema]. Attributes the operator did not set are absent: every
// getter reports whether the attribute was set so that the plugin can apply
// its own default.
type Config struct {
	// Values maps attribute names to values of Go type string (TypeString),
	// float64 (TypeNumber), bool (TypeBool), []string (TypeStringList) or
	// time.Duration (TypeDuration). Prefer the typed getters.
	Values map[string]any
}

// String returns a TypeString attribute and whether it was set.
func (c Config) String(name string) (string, bool) {
	v, ok := c.Values[name].(string)
	return v, ok
}

// Number returns a TypeNumber attribute and whether it was set. The host
// sends numbers as float64; a Config a test builds by hand may hold any Go
// integer or float type, and reads the same.
func (c Config) Number(name string) (float64, bool) {
	switch v := c.Values[name].(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int8:
		return float64(v), true
	case int16:
		return float64(v), true
	case int32:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint8:
		return float64(v), true
	case uint16:
		return float64(v), true
	case uint32:
		return float64(v), true
	case uint64:
		return float64(v), true
	}
	return 0, false
}

// Int returns a TypeNumber attribute truncated to an int, and whether it was
// set. Check in Configure that the value is whole if it matters.
func (c Config) Int(name string) (int, bool) {
	v, ok := c.Number(name)
	return int(v), ok
}

// Bool returns a TypeBool attribute and whether it was set.
func (c Config) Bool(name string) (bool, bool) {
	v, ok := c.Values[name].(bool)
	return v, ok
}

// Strings returns a TypeStringList attribute and whether it was set.
func (c Config) Strings(name string) ([]string, bool) {
	v, ok := c.Values[name].([]string)
	return v, ok
}

// Duration returns a TypeDuration attribute and whether it was set.
func (c Config) Duration(name string) (time.Duration, bool) {
	v, ok := c.Values[name].(time.Duration)
	return v, ok
}

// Diagnostic is one problem with the plugin's configuration, reported from
// Configure. vigil prints it at the file:line of the attribute it names.
type Diagnostic struct {
	// AttributePath names what the problem is about: "" for the config
	// block as a whole, "name" for an attribute, "name[2]" for the element
	// at index 2 (0-based) of a list attribute.
	AttributePath string
	// Summary is a short sentence: what is wrong.
	Summary string
	// Detail says why and what to do about it.
	Detail string
}

// AttributeError returns a Diagnostic about the attribute name.
func AttributeError(name, summary, detail string) Diagnostic {
	return Diagnostic{AttributePath: name, Summary: summary, Detail: detail}
}

// ElementError returns a Diagnostic about element index (0-based) of the list
// attribute name.
func ElementError(name string, index int, summary, detail string) Diagnostic {
	return Diagnostic{AttributePath: fmt.Sprintf("%s[%d]", name, index), Summary: summary, Detail: detail}
}

// Error formats the diagnostic on one line.
func (d Diagnostic) Error() string {
	var b strings.Builder
	if d.AttributePath != "" {
		b.WriteString(d.AttributePath)
		b.WriteString(": ")
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// Diagnostics is a list of configuration problems. It is an error; return
// diags.Err() from Configure so that an empty list means success.
type Diagnostics []Diagnostic

// Error joins the diagnostics, one per line.
func (ds Diagnostics) Error() string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Error()
	}
	return strings.Join(parts, "\n")
}

// Err returns ds as an error, or nil if ds is empty.
func (ds Diagnostics) Err() error {
	if len(ds) == 0 {
		return nil
	}
	return ds
}

// Ballot is one round's work for a source: every origin handed to it.
//
// The call's context carries the source's deadline for the round (vigil
// derives it from round_interval, or the operator sets `timeout`). Every
// target's Timeout fits inside it with room to spread the probes and to send
// the votes back; a source that cannot finish every target in time should
// cut the ones it cannot finish (different ones each round, not always the
// same) and report them as Abstain votes with ReasonOutOfTime.
type Ballot struct {
	// Round numbers the engine's rounds; it only helps correlate logs.
	Round uint64
	// Targets are the origins to judge. A (Site, Origin) pair appears once.
	Targets []Target
	// CAs are the CA bundles the targets name in TLS.CA, by name: PEM
	// certificates to trust for those origins instead of the system's.
	CAs map[string][]byte
}

// Target is one origin to judge, with everything a probe needs.
type Target struct {
	// Site is the site's name in the configuration ("www").
	Site string
	// Origin is the origin's name within the site ("a1").
	Origin string
	// Address is the origin's base URL: scheme, host and optional port,
	// for example "https://203.0.113.10:8443". It has no path.
	Address string
	// Host is the site's hostname, to send as the Host header and the TLS
	// server name ("www.example.com").
	Host string
	// Path is the health-check path, starting with "/" ("/cdn-health").
	Path string
	// Timeout bounds one probe of this origin (5s unless configured).
	Timeout time.Duration
	// UserAgent is the User-Agent to send.
	UserAgent string
	// Expect holds the site's optional stricter checks.
	Expect Expectations
	// TLS says how to check an https origin's certificate.
	TLS TLSSettings
	// Headers are extra request headers the operator set, by name. Their
	// values may be credentials: never log them.
	Headers map[string]string
	// FollowRedirects lets the probe follow redirects that stay on the same
	// host; a redirect elsewhere is never a success.
	FollowRedirects bool
	// MaxBody is the most bytes of the response body the probe reads
	// (0: the probe's default).
	MaxBody int64
}

// TLSSettings say how to check an origin's certificate.
type TLSSettings struct {
	// ServerName is the name to send (SNI) and to verify the certificate
	// against when it is not Host; empty means Host.
	ServerName string
	// CA names a bundle in Ballot.CAs to trust instead of the system's
	// roots; empty means the system's roots.
	CA string
	// InsecureSkipVerify turns certificate verification off: the operator
	// chose to accept any certificate from this origin.
	InsecureSkipVerify bool
}

// Expectations are a site's opt-in stricter checks. Each only ever turns an
// Up into a Down. Zero values mean "no check".
type Expectations struct {
	// Statuses, when not empty, lists the accepted HTTP status codes.
	Statuses []int
	// BodyContains, when not empty, must appear in the response body.
	BodyContains string
	// MaxLatency, when > 0, is the slowest acceptable response.
	MaxLatency time.Duration
}

// Value is the opinion a vote carries.
type Value int

// The valid vote values. The zero value is invalid and such votes are
// dropped.
const (
	// Up says the origin serves correctly.
	Up Value = 1
	// Down says the origin is failing.
	Down Value = 2
	// Abstain says the source did not judge the origin this round, and
	// why (the vote's Reason, such as ReasonOutOfTime). It is never
	// tallied: the origin passes on to the next source exactly as with no
	// vote. It is counted, logged and shown to operators, so that a source
	// that runs out of time or cannot check a target says so.
	Abstain Value = 3
)

// String returns "up", "down", "abstain" or "invalid(N)".
func (v Value) String() string {
	switch v {
	case Up:
		return "up"
	case Down:
		return "down"
	case Abstain:
		return "abstain"
	}
	return fmt.Sprintf("invalid(%d)", int(v))
}

// Reason says why a vote is what it is. Operators see it in `vigil probe`
// and in metrics. Use the most specific reason; put the particulars (the
// status code, the error text) in Vote.Detail.
//
// The standard reasons are a fixed list that every host knows. A plugin
// that has a more specific reason of its own (a certificate that expires
// soon, a checkpoint quota) still gives the nearest standard Reason and adds
// its own in [Vote.PluginReason], namespaced by the plugin:
// "tlscheck/cert_expiring". See [ValidPluginReason].
//
// It is the one reason type of the SDK: a probe's result (package
// sdk/probe) carries a Reason too, which goes into a vote as it is.
type Reason int

// The reasons a vote can give. New reasons may be added in later protocol
// versions; vigil shows unknown ones as "unspecified".
const (
	// ReasonUnspecified is the zero value: no reason given.
	ReasonUnspecified Reason = iota
	// ReasonOK: the check passed (an Up vote).
	ReasonOK
	// ReasonHTTP5xx: the origin answered with a 5xx status.
	ReasonHTTP5xx
	// ReasonConnectFailed: the connection could not be made (refused,
	// reset, unreachable, DNS failure).
	ReasonConnectFailed
	// ReasonTLSFailed: the TLS handshake or certificate verification failed.
	ReasonTLSFailed
	// ReasonTimeout: no answer within the probe's timeout.
	ReasonTimeout
	// ReasonUnexpectedStatus: the status is not in Expect.Statuses.
	ReasonUnexpectedStatus
	// ReasonBodyMismatch: the body lacks Expect.BodyContains.
	ReasonBodyMismatch
	// ReasonTooSlow: the answer came later than Expect.MaxLatency.
	ReasonTooSlow
	// ReasonError: any other failure of the check itself.
	ReasonError
	// ReasonOutOfTime: an Abstain: the source ran out of time in this round
	// before it could judge the target.
	ReasonOutOfTime
	// ReasonUnsupported: an Abstain: the source cannot check what the
	// target asks (for example a body check an upstream API cannot do).
	ReasonUnsupported
	// ReasonOverBudget: an Abstain: a request budget of the source (such as
	// an API quota per round) ran out before the target.
	ReasonOverBudget
	// ReasonNoVoter: an Abstain: no voter of the source could look at the
	// target (no node online or in range).
	ReasonNoVoter
	// ReasonOffHostRedirect: a redirect left the origin's host (a Down when
	// redirects are followed).
	ReasonOffHostRedirect
	// ReasonTooManyRedirects: redirects did not end (a Down).
	ReasonTooManyRedirects
)

// MaxReason is the highest Reason this SDK knows; a vote with a higher one
// (from a newer plugin) shows as ReasonUnspecified.
const MaxReason = ReasonTooManyRedirects

var reasonNames = [...]string{
	ReasonUnspecified:      "unspecified",
	ReasonOK:               "ok",
	ReasonHTTP5xx:          "http_5xx",
	ReasonConnectFailed:    "connect_failed",
	ReasonTLSFailed:        "tls_failed",
	ReasonTimeout:          "timeout",
	ReasonUnexpectedStatus: "unexpected_status",
	ReasonBodyMismatch:     "body_mismatch",
	ReasonTooSlow:          "too_slow",
	ReasonError:            "error",
	ReasonOutOfTime:        "out_of_time",
	ReasonUnsupported:      "unsupported",
	ReasonOverBudget:       "over_budget",
	ReasonNoVoter:          "no_voter",
	ReasonOffHostRedirect:  "off_host_redirect",
	ReasonTooManyRedirects: "too_many_redirects",
}

// String returns the reason's snake_case name, such as "http_5xx".
func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unspecified"
}

// ParseReason returns the Reason named s (as printed by String).
func ParseReason(s string) (Reason, bool) {
	for i, n := range reasonNames {
		if n == s {
			return Reason(i), true
		}
	}
	return ReasonUnspecified, false
}

// Vote is one voter's opinion of one target.
type Vote struct {
	// Site and Origin copy the target's names.
	Site   string
	Origin string
	// Voter names who looked: a node id, a checkpoint id, "direct".
	Voter string
	// Value is Up, Down or Abstain.
	Value Value
	// Reason classifies the outcome.
	Reason Reason
	// Detail is free text for operators ("status 503", "dial tcp: connection
	// refused"). Keep it short and free of secrets.
	Detail string
	// Latency is how long the check took, 0 if not measured.
	Latency time.Duration
	// PluginReason, when set, is a reason of the plugin's own that refines
	// Reason, namespaced by the plugin: "tlscheck/cert_expiring" (see
	// [ValidPluginReason]). Reason must still be the nearest standard
	// reason: a host older than SDK v0.1.0 sees only that. vigil keeps it
	// as a field of the vote, apart from Detail (plugin_reason in its API
	// and vigil probe -json), and counts votes by it in the metric
	// vigil_vote_plugin_reasons_total{reason}, which operators alert on.
	// Keep the plugin's reasons few: past 32 of one source the metric
	// folds the rest into reason="other". A vote with a malformed one is
	// dropped.
	PluginReason string
	// HTTP, when set, is what an HTTP check saw (its status code, the
	// time of each phase, the certificate's expiry), as fields rather
	// than in Detail: vigil exports them as the blackbox_exporter-style
	// series vigil_probe_http_status_code,
	// vigil_probe_http_duration_seconds{phase} and
	// vigil_probe_ssl_earliest_cert_expiry. Fill it from a probe.Result
	// with its HTTP method. Protocol 2; a host that predates it ignores
	// it.
	HTTP *HTTPProbe
}

// HTTPProbe is what one HTTP check of an origin saw (Vote.HTTP). A field
// that was not measured is zero.
type HTTPProbe struct {
	// StatusCode is the HTTP status of the last response; 0 when none
	// arrived.
	StatusCode int
	// Resolve, Connect, TLS, Processing and Transfer are the time of each
	// phase, summed over redirects: name resolution, the TCP connection,
	// the TLS handshake, from then to the response headers (the request
	// and the origin's processing), and reading the body. They are
	// blackbox_exporter's phases of probe_http_duration_seconds.
	Resolve, Connect, TLS, Processing, Transfer time.Duration
	// CertNotAfter is the expiry of the leaf certificate the origin
	// presented; zero for plain HTTP.
	CertNotAfter time.Time
}

// ValidPluginReason reports whether s is an acceptable Vote.PluginReason:
// a namespace (the plugin's short name) and a name, each of lower-case
// ASCII letters, digits, "_" and "-", joined by one "/", at most 64
// characters in all: "tlscheck/cert_expiring".
func ValidPluginReason(s string) bool {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '/' && i == len(ns):
		default:
			return false
		}
	}
	return true
}

// ValidVoter reports whether id is an acceptable Vote.Voter: 1 to 128
// characters of ASCII letters, digits and "._:-@/".
func ValidVoter(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '-', c == '@', c == '/':
		default:
			return false
		}
	}
	return true
}
