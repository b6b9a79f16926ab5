package pluginhost

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/sdk"
)

// HostVoter is the voter of the Abstain votes the host casts for a plugin
// on the targets it does not hand it (a capability the plugin did not
// declare).
const HostVoter = "vigil"

// gate splits the ballot: the targets the plugin can be handed, and an
// Abstain vote (sdk.ReasonUnsupported) for each of the others, naming the
// capabilities it lacks. The ballot keeps only the CA bundles its kept
// targets name. It returns ballot itself when every target can go.
func gate(info sdk.Info, ballot sdk.Ballot) (sdk.Ballot, []sdk.Vote, map[string]int) {
	var (
		kept    []sdk.Target
		votes   []sdk.Vote
		missing map[string]int
		details map[string]string // by the lacking capabilities: one detail each
	)
	for i := range ballot.Targets {
		t := &ballot.Targets[i]
		lack := sdk.MissingCapabilities(info, t)
		if lack == nil {
			if kept != nil {
				kept = append(kept, *t)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]sdk.Target, 0, len(ballot.Targets)-1), ballot.Targets[:i]...)
		}
		if missing == nil {
			missing = map[string]int{}
		}
		for _, c := range lack {
			missing[c]++
		}
		key := strings.Join(lack, ",")
		detail, ok := details[key]
		if !ok {
			if details == nil {
				details = map[string]string{}
			}
			detail = lackDetail(info, lack)
			details[key] = detail
		}
		votes = append(votes, sdk.Vote{
			Site: t.Site, Origin: t.Origin, Voter: HostVoter, Value: sdk.Abstain, Reason: sdk.ReasonUnsupported,
			PluginReason: sdk.PluginReasonMissingCapability,
			Detail:       detail,
		})
	}
	if votes == nil {
		return ballot, nil, nil
	}
	out := sdk.Ballot{Round: ballot.Round, Targets: kept}
	for _, t := range kept {
		if pem, ok := ballot.CAs[t.TLS.CA]; ok && t.TLS.CA != "" {
			if out.CAs == nil {
				out.CAs = map[string][]byte{}
			}
			out.CAs[t.TLS.CA] = pem
		}
	}
	return out, votes, missing
}

// lackDetail says why the host did not hand the plugin a target.
func lackDetail(info sdk.Info, lack []string) string {
	what := "plugin " + info.Name
	if info.ProtocolVersion < 2 {
		return fmt.Sprintf("%s speaks vote-source protocol 1, which cannot carry the health check's %s: rebuild it with SDK %s or later",
			what, settingNames(lack), sdk.Version)
	}
	return fmt.Sprintf("%s does not declare %s, which the health check's %s needs", what, strings.Join(lack, ", "), settingNames(lack))
}

// settings names the health_check attribute of each capability.
var settings = map[string]string{
	sdk.CapabilityCABundle:        "ca_file",
	sdk.CapabilityTLSServerName:   "tls_server_name",
	sdk.CapabilityTLSInsecure:     "insecure_skip_tls_verify",
	sdk.CapabilityHeaders:         "headers",
	sdk.CapabilityFollowRedirects: "follow_redirects",
	sdk.CapabilityMaxBody:         "max_body",
}

func settingNames(caps []string) string {
	names := make([]string, len(caps))
	for i, c := range caps {
		if n, ok := settings[c]; ok {
			names[i] = n
		} else {
			names[i] = c
		}
	}
	return strings.Join(names, ", ")
}

// Need is a capability that some sites handed to a source need of its
// plugin, for [CheckOptions.Needs].
type Need struct {
	// Capability is an sdk capability, such as sdk.CapabilityCABundle.
	Capability string
	// Sites names the sites whose health check needs it, sorted.
	Sites []string
}

// Needs returns the capabilities that the sites handed to the source
// named source need of its plugin, in a fixed order: what the targets of
// their origins would need (sdk.RequiredCapabilities).
func Needs(cfg *config.Config, source string) []Need {
	bySite := map[string][]string{}
	for _, site := range cfg.Sites {
		if !slices.Contains(site.Sources, source) { // the loader fills in every source when a site names none
			continue
		}
		hc := site.HealthCheck
		if hc == nil {
			continue
		}
		for _, o := range site.Origins {
			t := sdk.Target{Address: o.Address,
				TLS:     sdk.TLSSettings{ServerName: hc.TLSServerName, CA: hc.CAName, InsecureSkipVerify: hc.InsecureSkipTLSVerify},
				Headers: hc.Headers, FollowRedirects: hc.FollowRedirects, MaxBody: hc.MaxBody}
			for _, c := range sdk.RequiredCapabilities(&t) {
				if !slices.Contains(bySite[c], site.Name) {
					bySite[c] = append(bySite[c], site.Name)
				}
			}
		}
	}
	var needs []Need
	for _, c := range slices.Sorted(maps.Keys(bySite)) {
		sites := bySite[c]
		slices.Sort(sites)
		needs = append(needs, Need{Capability: c, Sites: sites})
	}
	return needs
}

// checkNeeds warns, at the source's block, of each capability the sites
// need that the plugin did not declare.
func (s *Source) checkNeeds(info sdk.Info, needs []Need) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, n := range needs {
		if info.Has(n.Capability) {
			continue
		}
		sites := n.Sites
		more := ""
		if len(sites) > 5 {
			more = fmt.Sprintf(" and %d more", len(sites)-5)
			sites = sites[:5]
		}
		setting := settingNames([]string{n.Capability})
		who := "site " + strings.Join(sites, ", ") + more + " sets"
		if len(n.Sites) > 1 {
			who = "sites " + strings.Join(sites, ", ") + more + " set"
		}
		what := fmt.Sprintf("does not declare the capability %s, which the health check's %s needs, and %s it", n.Capability, setting, who)
		fix := "use a plugin that honours it, or take these sites off this source (the site's sources attribute)"
		if info.ProtocolVersion < 2 {
			what = fmt.Sprintf("speaks vote-source protocol 1, which cannot carry the health check's %s, and %s it", setting, who)
			fix = fmt.Sprintf("rebuild the plugin with SDK %s or later (protocol 2), or take these sites off this source (the site's sources attribute)", sdk.Version)
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Vote-source plugin cannot check some sites",
			Detail: fmt.Sprintf("Source %q: plugin %s %s %s. This source abstains on their origins (reason unsupported, %s); %s.",
				s.spec.Name, info.Name, info.Version, what, sdk.PluginReasonMissingCapability, fix),
			Subject: s.spec.Range.Ptr(),
		})
	}
	return diags
}
