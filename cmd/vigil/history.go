package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
	"github.com/vigilcdn/vigil/core/history"
	"github.com/vigilcdn/vigil/core/simulate"
	"github.com/vigilcdn/vigil/core/store"
)

func init() {
	subcommandGroup("history", "export the verdict history (history.ring) in data_dir")
	register(command{
		name: "history export", synopsis: "write the recorded rounds of every origin to a portable file",
		usage: "vigil history export [-data-dir DIR | -config PATH] -o FILE",
		help: `Reads DIR/history.ring (read-only: the agent may be running) and writes its
recorded rounds per site and origin, with the journal's events when the state
file can be read (not while an agent holds it), as JSON lines: the input of
vigil simulate -history. The file keeps only hashes of the names: with -config
they come from the configuration, with -data-dir from the state file.
See docs/replay.md.`,
		run: runHistoryExport,
	})
}

func runHistoryExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("history export")
	dataDir := fs.String("data-dir", "", "the agent's data directory (control { data_dir }; default \""+config.DefaultDataDir+"\")")
	cfgPath := fs.String("config", "", "read data_dir, the names and the chain from this configuration file or folder")
	outPath := fs.String("o", "", "the file to write (required; - for standard output)")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if *outPath == "" {
		fmt.Fprintln(stderr, "vigil history export: -o FILE is required, such as: vigil history export -config vigil.hcl -o incident.jsonl")
		return 2
	}
	var cfg *config.Config
	if *cfgPath != "" && *dataDir == "" {
		c, diags := config.Load(*cfgPath)
		if diags.HasErrors() {
			_ = config.WriteDiagnostics(stderr, c.Files, diags)
			return 2
		}
		cfg = c
	}
	dir, code := stateDataDir("history export", pos, *dataDir, *cfgPath, stderr)
	if code != 0 {
		return code
	}
	x, err := exportHistory(dir, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "vigil history export: %v\n", err)
		return 1
	}
	var w io.Writer = stdout
	var f *os.File
	if *outPath != "-" {
		if f, err = os.Create(*outPath); err != nil {
			fmt.Fprintf(stderr, "vigil history export: %v\n", err)
			return 1
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	err = x.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && f != nil {
		err = f.Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "vigil history export: writing %s: %v\n", *outPath, err)
		return 1
	}
	points := 0
	for _, o := range x.Origins {
		points += len(o.Points)
	}
	if *outPath != "-" {
		votes := "per-source votes included"
		switch {
		case !x.Header.Votes:
			votes = "verdicts only: the history file keeps no votes (format version 1)"
		case !x.Header.Partition:
			votes += "; no partition data: the history file keeps no voter groups (format version 2)"
		default:
			votes += ", and the partition rule's down groups"
		}
		fmt.Fprintf(stdout, "%s: %d origins, %d recorded rounds, %d journal events (names from the %s; journal: %s; %s)\n",
			*outPath, len(x.Origins), points, len(x.Events), x.Header.Names, x.Header.Journal, votes)
	}
	return 0
}

// exportHistory reads dir's history file and names it from cfg, or from
// dir's state file when cfg is nil.
func exportHistory(dir string, cfg *config.Config) (*simulate.Export, error) {
	snap, err := history.ReadSnapshot(filepath.Join(dir, engine.HistoryFile))
	if err != nil {
		return nil, err
	}
	state, events, why := readState(dir)
	h := simulate.ExportHeader{Exported: time.Now().UTC(), Journal: why}
	var names []simulate.Names
	switch {
	case cfg != nil:
		h.Names, h.RoundInterval = "config", cfg.Control.RoundInterval.String()
		h.ConfirmInterval = simulate.ShortestConfirm(cfg)
		if cfg.Control.Partition != nil {
			h.PartitionLabel = cfg.Control.Partition.Label
		}
		for _, s := range cfg.Sources {
			h.Sources = append(h.Sources, s.Name)
		}
		for _, s := range cfg.Sites {
			for _, o := range s.Origins {
				names = append(names, simulate.Names{Site: s.Name, Origin: o.Name})
			}
		}
	case state != nil:
		h.Names = "state"
		for name, s := range state.Sites {
			for o := range s.Origins {
				names = append(names, simulate.Names{Site: name, Origin: o})
			}
		}
	default:
		return nil, fmt.Errorf("the history keeps only hashes of the names, and the state file cannot be read to name them (%s): give -config with the agent's configuration", why)
	}
	return simulate.BuildExport(snap, names, h, events), nil
}

// readState reads the state file in dir, if it can: not while an agent
// holds it. why says what was read or why not.
func readState(dir string) (*store.State, []store.Event, string) {
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); err != nil {
		return nil, nil, "no state file in " + dir
	}
	st, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1, LockTimeout: 500 * time.Millisecond, NoBoltCheck: true})
	if err != nil {
		if errors.Is(err, store.ErrInUse) {
			return nil, nil, "not read: an agent holds the state file; stop it, or export again later"
		}
		return nil, nil, "not read: " + err.Error()
	}
	defer st.Close()
	ctx := context.Background()
	s, err := st.Load(ctx)
	if err != nil {
		return nil, nil, "not read: " + err.Error()
	}
	evs, err := st.Events(ctx, 0, "", 1<<30)
	if err != nil {
		return s, nil, "not read: " + err.Error()
	}
	if evs == nil {
		evs = []store.Event{}
	}
	return s, evs, "included"
}
