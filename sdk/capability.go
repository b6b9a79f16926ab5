package sdk

import (
	"net/url"
	"strings"
)

// The capabilities a plugin declares in [Info.Capabilities].
//
// A target setting capability says that the plugin reads that setting of a
// [Target] and either honours it in its check or, when it cannot, casts an
// Abstain vote with a reason for that target. vigil hands a plugin a target
// that uses such a setting only when the plugin declared its capability
// ([RequiredCapabilities] says which a target needs); otherwise it casts,
// for the plugin, an Abstain vote with [ReasonUnsupported] and the plugin
// reason [PluginReasonMissingCapability]. A plugin that uses package
// sdk/probe for its checks honours them all ([ProbeCapabilities]).
//
// A protocol-1 plugin declares nothing: vigil treats it as having none of
// them. Names vigil does not know are kept and shown, never an error.
const (
	// CapabilityCABundle: the plugin verifies an https origin's certificate
	// against the bundle that TLS.CA names in Ballot.CAs (a site's ca_file).
	CapabilityCABundle = "tls.ca_bundle"
	// CapabilityTLSServerName: the plugin sends TLS.ServerName as SNI and
	// verifies the certificate against it.
	CapabilityTLSServerName = "tls.server_name"
	// CapabilityTLSInsecure: the plugin skips certificate verification
	// when TLS.InsecureSkipVerify is set.
	CapabilityTLSInsecure = "tls.insecure_skip_verify"
	// CapabilityHeaders: the plugin sends the target's Headers.
	CapabilityHeaders = "http.headers"
	// CapabilityFollowRedirects: the plugin follows same-host redirects
	// when FollowRedirects is set.
	CapabilityFollowRedirects = "http.follow_redirects"
	// CapabilityMaxBody: the plugin reads at most MaxBody bytes of a body.
	CapabilityMaxBody = "http.max_body"
	// CapabilityAbstain: the plugin answers what it cannot judge with an
	// Abstain vote and a reason rather than with silence. It changes
	// nothing in what vigil sends; operators see it in `vigil plugin list`.
	// Every protocol-2 host accepts Abstain votes.
	CapabilityAbstain = "abstain"
)

// PluginReasonMissingCapability is the plugin reason of the Abstain votes
// vigil casts for a plugin on a target that needs a capability the plugin
// did not declare.
const PluginReasonMissingCapability = "vigil/missing_capability"

// KnownCapabilities returns every capability this SDK defines, in a fixed
// order. A name outside it is not an error on the wire (a newer host may
// know it), but in a plugin built with this SDK it is most likely a typo
// that vigil reads as "not declared": package sdktest's CheckInfo fails on
// it.
func KnownCapabilities() []string {
	return ProbeCapabilities()
}

// ProbeCapabilities returns the capabilities of a plugin that checks every
// target with package sdk/probe, which honours every target setting, and
// that abstains with a reason on what it cannot judge. Return them from
// Info only if the plugin does both.
func ProbeCapabilities() []string {
	return []string{CapabilityCABundle, CapabilityTLSServerName, CapabilityTLSInsecure,
		CapabilityHeaders, CapabilityFollowRedirects, CapabilityMaxBody, CapabilityAbstain}
}

// RequiredCapabilities returns the capabilities a plugin must declare to
// be handed t, in a fixed order; nil when t needs none. The TLS settings
// count only for an https Address.
func RequiredCapabilities(t *Target) []string {
	var need []string
	if t.TLS != (TLSSettings{}) && isHTTPS(t.Address) {
		if t.TLS.CA != "" {
			need = append(need, CapabilityCABundle)
		}
		if t.TLS.ServerName != "" {
			need = append(need, CapabilityTLSServerName)
		}
		if t.TLS.InsecureSkipVerify {
			need = append(need, CapabilityTLSInsecure)
		}
	}
	if len(t.Headers) > 0 {
		need = append(need, CapabilityHeaders)
	}
	if t.FollowRedirects {
		need = append(need, CapabilityFollowRedirects)
	}
	if t.MaxBody != 0 {
		need = append(need, CapabilityMaxBody)
	}
	return need
}

// MissingCapabilities returns the capabilities t needs that info does not
// declare, or nil.
func MissingCapabilities(info Info, t *Target) []string {
	var missing []string
	for _, c := range RequiredCapabilities(t) {
		if !info.Has(c) {
			missing = append(missing, c)
		}
	}
	return missing
}

func isHTTPS(address string) bool {
	u, err := url.Parse(address)
	return err == nil && strings.EqualFold(u.Scheme, "https")
}
