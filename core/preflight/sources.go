package preflight

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/pluginhost"
)

// checker is what the engine's real source (*pluginhost.Source) offers for
// a check.
type checker interface {
	Check(ctx context.Context, opts pluginhost.CheckOptions) hcl.Diagnostics
}

// checkSources checks every source's plugin, concurrently as the engine
// starts them.
func checkSources(ctx context.Context, cfg *config.Config, loc *locator, opts Options) hcl.Diagnostics {
	per := make([]hcl.Diagnostics, len(cfg.Sources))
	var wg sync.WaitGroup
	for i, s := range cfg.Sources {
		wg.Go(func() { per[i] = checkSource(ctx, cfg, s, loc, opts) })
	}
	wg.Wait()
	var diags hcl.Diagnostics
	for _, d := range per {
		diags = append(diags, d...)
	}
	return diags
}

// checkSource builds the source exactly as the agent's engine does and
// runs pluginhost's check of it.
func checkSource(ctx context.Context, cfg *config.Config, s *config.Source, loc *locator, opts Options) hcl.Diagnostics {
	vs := engine.PluginSource(s, cfg.Control.PluginDir, opts.Logger)
	c, ok := vs.(checker)
	if !ok {
		vs.Close()
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot check vote source",
			Detail:   fmt.Sprintf("Source %q: the engine builds it as %T, which has no Check method; this is a bug of vigil.", s.Name, vs),
			Subject:  s.DeclRange.Ptr(),
		}}
	}
	diags := c.Check(ctx, pluginhost.CheckOptions{
		Offline: opts.Offline,
		At:      func(name string) hcl.Range { return loc.attr(s.DeclRange, name) },
		Needs:   pluginhost.Needs(cfg, s.Name),
	})
	for _, d := range diags {
		if d.Severity == hcl.DiagError && strings.Contains(d.Detail, syscall.EADDRINUSE.Error()) {
			pluginInUse(d)
		}
	}
	return diags
}

// pluginInUse turns a plugin's failure to bind a taken address into a
// warning: the plugin's Configure binds its listener, so while the agent
// runs on this machine with this configuration its plugin holds the
// address and the check's copy cannot take it. The plugin says no more
// than its diagnostic's text, so the address-in-use error is recognised
// there (the plugin runs on this machine: the same system's wording).
func pluginInUse(d *hcl.Diagnostic) {
	d.Severity = hcl.DiagWarning
	d.Summary += " (address in use)"
	d.Detail += " The check runs the plugin's Configure, which binds this address, and found it taken on this machine: that is expected while an agent with this configuration runs here (a check cannot tell it from another program holding it). Configure stopped there, so what the plugin checks after it binds went unchecked."
}
