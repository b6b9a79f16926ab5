package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/simulate"
)

func init() {
	register(command{
		name: "simulate", synopsis: "replay a timeline of votes and actions through the real decision engine",
		usage: "vigil simulate -config PATH -timeline FILE",
		help: `Reads the timeline (JSON lines: votes per round, operator actions) and
prints every event the engine emits, round by round. Nothing is saved and no
origin is probed. The formats are in docs/simulate.md.`,
		run: runSimulate,
	})
}

func runSimulate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("simulate")
	path := fs.String("config", "", "configuration file or folder of *.hcl files (required)")
	timeline := fs.String("timeline", "", "timeline file, JSON lines (required; - for standard input)")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "vigil simulate: unexpected argument %q: give the files with -config and -timeline\n", pos[0])
		return 2
	}
	if *path == "" || *timeline == "" {
		fmt.Fprintln(stderr, "vigil simulate: -config and -timeline are required, such as: vigil simulate -config site.hcl -timeline incident.jsonl")
		return 2
	}
	cfg, diags := config.Load(*path)
	if diags.HasErrors() {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
		return 2
	}
	var in io.Reader = os.Stdin
	if *timeline != "-" {
		f, err := os.Open(*timeline)
		if err != nil {
			fmt.Fprintf(stderr, "vigil simulate: cannot read the timeline: %v\n", err)
			return 2
		}
		defer f.Close()
		in = f
	}
	steps, err := simulate.ParseTimeline(in, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "vigil simulate: %s: %v\n", *timeline, err)
		return 2
	}
	out := bufio.NewWriter(stdout)
	if err := simulate.Run(cfg, steps, out); err != nil {
		fmt.Fprintf(stderr, "vigil simulate: %v\n", err)
		return 1
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "vigil simulate: writing output: %v\n", err)
		return 1
	}
	return 0
}
