package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/vigilcdn/vigil/core/config"
)

func init() {
	register("validate", "check a configuration and report every mistake", runValidate)
}

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file or folder of *.hcl files (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "vigil validate: -config is required, such as: vigil validate -config examples/quickstart.hcl")
		return 2
	}
	cfg, diags := config.Load(*path)
	if diags.HasErrors() {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
		fmt.Fprintf(stderr, "%s: configuration is not valid (%d error(s))\n", *path, countErrors(diags))
		return 1
	}
	if len(diags) > 0 { // warnings
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
	}
	fmt.Fprintf(stdout, "%s: configuration is valid: %d source(s), %d site(s)\n", *path, len(cfg.Sources), len(cfg.Sites))
	return 0
}

func countErrors(diags interface{ Errs() []error }) int { return len(diags.Errs()) }
