package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	corepreflight "github.com/vigilcdn/vigil/core/preflight"
)

func init() {
	register(command{
		name: "validate", synopsis: "check a configuration as the agent would at start, and report every mistake",
		usage: "vigil validate [-offline] PATH [PATH ...]",
		help: `Each PATH is a configuration: a file, or a folder whose *.hcl files form
one. Every check the agent makes before its first round is made, short of
probing origins: the HCL, the plugin binaries and their checksums, each
plugin's config {} block (the plugins are launched to check it, as the agent
does), the listen addresses and the round's time budget. -offline skips what
needs a plugin to run. -config PATH is accepted as another PATH.
Exit status: 0 every PATH is valid, 1 some is not, 2 usage error.`,
		run: runValidate,
	})
}

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate")
	var paths []string
	fs.Func("config", "a configuration file or folder to check (the same as a PATH argument; may be repeated)", func(s string) error {
		paths = append(paths, s)
		return nil
	})
	offline := fs.Bool("offline", false, "do not launch plugins: check the configuration and the plugin binaries only")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	paths = append(paths, pos...)
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "vigil validate: give a configuration file or folder, such as: vigil validate examples/quickstart.hcl")
		return 2
	}
	code = 0
	for _, path := range paths {
		if !validateOne(path, *offline, stdout, stderr) {
			code = 1
		}
	}
	return code
}

// validateOne checks one configuration and says what it found.
func validateOne(path string, offline bool, stdout, stderr io.Writer) bool {
	cfg, diags := config.Load(path)
	if !diags.HasErrors() {
		diags = append(diags, preflight(cfg, offline, stderr)...)
	}
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
	}
	if diags.HasErrors() {
		fmt.Fprintf(stderr, "%s: configuration is not valid (%d error(s))\n", path, len(diags.Errs()))
		return false
	}
	how := "plugins launched and configured"
	if offline {
		how = "offline: plugins not launched"
	}
	fmt.Fprintf(stdout, "%s: configuration is valid: %d source(s), %d site(s) (%s)\n", path, len(cfg.Sources), len(cfg.Sites), how)
	for _, note := range corepreflight.Notes(cfg) {
		fmt.Fprintf(stdout, "%s: %s\n", path, note)
	}
	return true
}

// preflight runs the agent's own start checks on a loaded configuration
// (core/preflight): plugins launched and configured unless offline.
func preflight(cfg *config.Config, offline bool, stderr io.Writer) hcl.Diagnostics {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := hclog.New(&hclog.LoggerOptions{Name: "vigil", Level: hclog.Warn, Output: stderr})
	return corepreflight.Check(ctx, cfg, corepreflight.Options{Offline: offline, Logger: log})
}
