package preflight

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// Options say how far Check goes.
type Options struct {
	// Offline starts no process and binds no port: the plugins are found
	// and their checksums verified but not launched (their config blocks
	// go unchecked), listen addresses are checked for form only, and an
	// unset environment variable is a warning, not an error.
	Offline bool
	// Logger receives the plugins' log lines and the host's messages about
	// them while they are checked, at the levels the agent logs them
	// ("vote source started" is Info): nil discards them.
	Logger hclog.Logger
}

// Check runs on a loaded configuration (config.Load without errors) the
// checks the agent runs before its first round, short of probing origins
// and of opening the state, and returns what is wrong as diagnostics at
// the attribute at fault. Errors are what the agent would refuse to start
// with; warnings what it would start with but not as written. A
// configuration with no error here and none from config.Load starts.
func Check(ctx context.Context, cfg *config.Config, opts Options) hcl.Diagnostics {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	loc := newLocator(cfg.Files)
	var diags hcl.Diagnostics
	diags = append(diags, checkDataDir(cfg.Control, loc)...)
	diags = append(diags, checkToken(cfg.Control.API, loc, opts.Offline)...)
	diags = append(diags, checkSources(ctx, cfg, loc, opts)...)
	diags = append(diags, checkDNS(ctx, cfg, loc, opts.Offline, opts.Logger)...)
	diags = append(diags, checkAPI(cfg, loc, opts.Offline)...)
	diags = append(diags, checkCollision(cfg, loc)...)
	diags = append(diags, checkProbeFit(cfg, loc)...)
	diags = append(diags, checkScale(cfg, loc)...)
	diags = append(diags, checkEtcd(ctx, cfg, loc, opts.Offline)...)
	return diags
}
