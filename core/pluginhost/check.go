package pluginhost

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/sdk/host"
)

// CheckOptions say how far [Source.Check] goes and where its diagnostics
// point.
type CheckOptions struct {
	// Offline checks only what needs no process: the binary is found and
	// executable, its checksum matches, the env variables are set. Nothing
	// is started.
	Offline bool
	// At returns the range of an attribute of the source block by name:
	// "plugin", "checksum" or "env". A nil At, or a zero range, means
	// Spec.Range. It is called only for a problem to report.
	At func(attribute string) hcl.Range
	// Needs are the capabilities the sites handed to the source need of
	// its plugin ([Needs] computes them from the configuration). Unless
	// Offline, each one the started plugin does not declare is a warning
	// at the source's block, naming the sites.
	Needs []Need
}

// Check runs Start's checks without keeping the plugin, for a
// configuration check such as `vigil validate`. First, with nothing
// started, it finds the binary (the plugin attribute at fault) and verifies
// its checksum (the checksum attribute at fault), as Start does before it
// launches the plugin, and warns of env variables that are not set. Then,
// unless opts.Offline, it runs Start itself (launch, Info, ConfigSchema,
// the decode of the config block against the schema, Configure) and
// closes the Source. Last, it warns of each of opts.Needs that the plugin
// does not declare.
//
// Configure runs for real, side effects included: a plugin that listens
// binds its address until the Source is closed, moments later. Check
// closes the Source in every case: make one for the check.
func (s *Source) Check(ctx context.Context, opts CheckOptions) hcl.Diagnostics {
	defer s.Close()
	diags := s.checkBinary(opts.At)
	if diags.HasErrors() || opts.Offline {
		return diags
	}
	diags = append(diags, s.Start(ctx)...)
	if diags.HasErrors() {
		return diags
	}
	return append(diags, s.checkNeeds(s.Info(), opts.Needs)...)
}

// checkBinary is what launch checks before it starts the process.
func (s *Source) checkBinary(at func(string) hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if _, missing := hostEnv(s.spec.Env); len(missing) > 0 {
		diags = append(diags, s.diagAt(at, "env", hcl.DiagWarning, "Environment variables not set",
			fmt.Sprintf("env names %s, which vigil's environment does not set: the plugin starts without them. Export them where the agent runs, or take them out of env.",
				strings.Join(missing, ", "))))
	}
	if rc, key, err := s.reattachFor(); err != nil {
		return append(diags, s.diagAt(at, "plugin", hcl.DiagError, "Cannot attach to the vote-source plugin in debug mode", err.Error()))
	} else if rc != nil {
		return append(diags, s.diagAt(at, "plugin", hcl.DiagWarning, "Vote-source plugin in debug mode",
			fmt.Sprintf("%s names it (%q): vigil attaches to that process (pid %d) instead of starting the binary, whose presence and checksum are not checked. Unset %s to check the binary.",
				host.ReattachEnv, key, rc.Pid, host.ReattachEnv)))
	}
	path, err := resolve(s.spec.Plugin, s.spec.PluginDir)
	if err != nil {
		return append(diags, s.diagAt(at, "plugin", hcl.DiagError, "Cannot start vote-source plugin", err.Error()))
	}
	if s.spec.Checksum == "" {
		return diags
	}
	sum, err := parseChecksum(s.spec.Checksum)
	if err != nil {
		return append(diags, s.diagAt(at, "checksum", hcl.DiagError, "Invalid plugin checksum", err.Error()))
	}
	if err := verifyChecksum(path, sum); err != nil {
		return append(diags, s.diagAt(at, "checksum", hcl.DiagError, "Plugin binary does not match its checksum", err.Error()))
	}
	return diags
}

func (s *Source) diagAt(at func(string) hcl.Range, attribute string, sev hcl.DiagnosticSeverity, summary, detail string) *hcl.Diagnostic {
	subject := s.spec.Range
	if at != nil {
		if r := at(attribute); r.Filename != "" {
			subject = r
		}
	}
	return &hcl.Diagnostic{
		Severity: sev,
		Summary:  summary,
		Detail:   fmt.Sprintf("Source %q: %s", s.spec.Name, detail),
		Subject:  subject.Ptr(),
	}
}
