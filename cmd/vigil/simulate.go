package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/simulate"
)

func init() {
	register(command{
		name: "simulate", synopsis: "replay a timeline of votes and actions through the real decision engine",
		usage: "vigil simulate -config PATH (-timeline FILE | -history DATA_DIR_OR_EXPORT)",
		help: `Reads the timeline (JSON lines: votes per round, confirmation ticks between
rounds, operator actions) and prints every event the engine emits, round by
round. Nothing is saved and no origin is probed. The formats are in
docs/simulate.md.

With -history, replays the recorded verdicts of an agent's data_dir (its
history.ring) or of a vigil history export through the configuration, and
prints the recorded and the replayed switches side by side with a one-line
verdict ("1 fewer switch, failover 2 s later"). While an agent runs on the
data_dir, its journal and names are read through its API (-address, -token).
See docs/replay.md.`,
		run: runSimulate,
	})
}

// simulateAutoNote is what simulate says of sites_per_round = "auto": a
// replay has no real time to size rounds from.
const simulateAutoNote = `vigil simulate: sites_per_round = "auto": a replay has no real time, so every round probes every eligible site, as if probes took no time (the size auto grows to when the sources keep up)`

func runSimulate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("simulate")
	path := fs.String("config", "", "configuration file or folder of *.hcl files (required)")
	timeline := fs.String("timeline", "", "timeline file, JSON lines (- for standard input)")
	hist := fs.String("history", "", "replay the recorded verdicts of this data_dir or `export` (vigil history export) instead of a timeline")
	agentFlags(fs)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "vigil simulate: unexpected argument %q: give the files with -config and -timeline\n", pos[0])
		return 2
	}
	if *path == "" || (*timeline == "") == (*hist == "") {
		fmt.Fprintln(stderr, "vigil simulate: -config and one of -timeline or -history are required, such as: vigil simulate -config site.hcl -timeline incident.jsonl")
		return 2
	}
	cfg, diags := config.Load(*path)
	if diags.HasErrors() {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
		return 2
	}
	if cfg.Control.SitesPerRoundAuto {
		fmt.Fprintln(stderr, simulateAutoNote)
	}
	if *hist != "" {
		return replayHistory(*hist, cfg, agentClient(fs, cfg), stdout, stderr)
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

// replayHistory is vigil simulate -history. c is the API of the agent
// that may hold from's state file: a live data dir's journal and names
// are read through it.
func replayHistory(from string, cfg *config.Config, c *api.Client, stdout, stderr io.Writer) int {
	var x *simulate.Export
	var warn string
	if st, err := os.Stat(from); err == nil && st.IsDir() {
		if x, err = exportHistory(from, nil, c); err != nil {
			// The names from the replay's own configuration: the file
			// keeps their hashes. Its sources name the recorded chain
			// positions, position for position (the export's tallies
			// and settling sources are named by them).
			if x, err = exportHistory(from, cfg, c); err != nil {
				fmt.Fprintf(stderr, "vigil simulate: %v\n", err)
				return 2
			}
			x.Header.RoundInterval, x.Header.Names = "", "the replayed configuration"
			x.Header.ConfirmInterval = "" // the replayed configuration's, not the recording's
			x.Header.PartitionLabel = ""  // likewise
			warn = "the history's names come from this configuration (neither the state file nor the running agent could be read): its sources name the recorded chain positions, position for position"
		}
	} else {
		f, err := os.Open(from)
		if err != nil {
			fmt.Fprintf(stderr, "vigil simulate: cannot read the history: %v\n", err)
			return 2
		}
		defer f.Close()
		if x, err = simulate.ReadExport(f); err != nil {
			fmt.Fprintf(stderr, "vigil simulate: %s: %v\n", from, err)
			return 2
		}
	}
	res, err := simulate.Replay(x, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "vigil simulate: %v\n", err)
		return 1
	}
	if warn != "" {
		res.Warnings = append([]string{warn}, res.Warnings...)
	}
	out := bufio.NewWriter(stdout)
	res.WriteText(out)
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "vigil simulate: writing output: %v\n", err)
		return 1
	}
	return 0
}
