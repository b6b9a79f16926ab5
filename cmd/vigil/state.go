package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/store"
)

func init() {
	subcommandGroup("state", "check or restore the state file (vigil.db) in data_dir")
	register(command{
		name: "state check", synopsis: "run the full check of the state file (read-only)",
		usage: "vigil state check [-data-dir DIR | -config PATH]",
		help: `Checks DIR/vigil.db (no agent may be running on it) and prints a summary.
Exit status: 0 sound, 1 damaged (with the way out), 2 usage or configuration
error. See docs/state.md.`,
		run: runStateCheck,
	})
	register(command{
		name: "state restore", synopsis: "put the last-good copy of the state file back",
		usage: "vigil state restore [-data-dir DIR | -config PATH] [-from FILE]",
		help: `Puts the last-good copy (DIR/vigil.db.good, or FILE) in place after it
passes the full check, keeping the current file as vigil.db.damaged-TIMESTAMP.
Exit status: 0 restored, 1 refused, 2 usage or configuration error.
See docs/state.md.`,
		run: runStateRestore,
	})
}

// stateFlags declares the flags naming the data directory.
func stateFlags(name string) (fs *flag.FlagSet, dataDir, cfgPath *string) {
	fs = newFlags("state " + name)
	dataDir = fs.String("data-dir", "", "the agent's data directory (control { data_dir }; default \""+config.DefaultDataDir+"\")")
	cfgPath = fs.String("config", "", "read data_dir from this configuration file or folder instead")
	return fs, dataDir, cfgPath
}

// stateDataDir resolves the data directory from -data-dir or -config; a
// non-zero code means the command stops with it.
func stateDataDir(cmd string, pos []string, dataDir, cfgPath string, stderr io.Writer) (string, int) {
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "vigil state %s: unexpected argument %q: the data directory is given with -data-dir DIR\n", cmd, pos[0])
		return "", 2
	}
	switch {
	case dataDir != "" && cfgPath != "":
		fmt.Fprintf(stderr, "vigil state %s: give -data-dir or -config, not both\n", cmd)
		return "", 2
	case dataDir != "":
		return dataDir, 0
	case cfgPath != "":
		cfg, diags := config.Load(cfgPath)
		if diags.HasErrors() {
			_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
			fmt.Fprintf(stderr, "vigil state %s: %s is not valid; fix it or pass -data-dir\n", cmd, cfgPath)
			return "", 2
		}
		if cfg.Control.Store != nil {
			fmt.Fprintf(stderr, "vigil state %s: %s keeps the state in etcd (control { store \"etcd\" }); vigil state works on the embedded store in data_dir only\n", cmd, cfgPath)
			return "", 2
		}
		return cfg.Control.DataDir, 0
	}
	return config.DefaultDataDir, 0
}

func runStateCheck(args []string, stdout, stderr io.Writer) int {
	fs, dataDir, cfgPath := stateFlags("check")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	dir, code := stateDataDir("check", pos, *dataDir, *cfgPath, stderr)
	if code != 0 {
		return code
	}
	rep, err := store.Check(dir)
	if err != nil {
		fmt.Fprintf(stderr, "vigil state check: %v\n", err)
		return 1
	}
	printStateCheck(stdout, rep, time.Now())
	return 0
}

func printStateCheck(w io.Writer, rep *store.CheckReport, now time.Time) {
	fmt.Fprintf(w, "%s: sound (full check in %s)\n", rep.Path, rep.Took.Round(time.Millisecond))
	fmt.Fprintf(w, "  sites           %d\n", rep.Sites)
	if rep.Events > 0 {
		fmt.Fprintf(w, "  journal         %d events (%d to %d)\n", rep.Events, rep.FirstEvent, rep.LastEvent)
	} else {
		fmt.Fprintf(w, "  journal         no events\n")
	}
	fmt.Fprintf(w, "  last round      %d\n", rep.Meta.Round)
	fmt.Fprintf(w, "  publication     version %d\n", rep.Meta.Publication)
	fmt.Fprintf(w, "  file            %s (%d pages of %d bytes: %d in use, %d free)\n", stateSize(rep.Size), rep.Pages, rep.PageSize, rep.InUse, rep.Free)
	switch {
	case rep.Good == nil:
		fmt.Fprintf(w, "  last-good copy  none yet (the agent writes one at start, every 10 minutes and when it stops)\n")
	case rep.GoodProblem != "":
		fmt.Fprintf(w, "  last-good copy  %s is DAMAGED (%s); the agent replaces it at its next copy\n", rep.Good.Path, rep.GoodProblem)
	default:
		fmt.Fprintf(w, "  last-good copy  %s, %s, written %s\n", rep.Good.Path, stateSize(rep.Good.Size), stateAge(rep.Good.Time, now))
	}
	if rep.PreviousGood != nil {
		fmt.Fprintf(w, "  previous copy   %s, written %s\n", rep.PreviousGood.Path, stateAge(rep.PreviousGood.Time, now))
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
}

func runStateRestore(args []string, stdout, stderr io.Writer) int {
	fs, dataDir, cfgPath := stateFlags("restore")
	from := fs.String("from", "", "restore this file instead of the last-good copy")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	dir, code := stateDataDir("restore", pos, *dataDir, *cfgPath, stderr)
	if code != 0 {
		return code
	}
	rep, err := store.Restore(dir, *from)
	if rep != nil {
		for _, s := range rep.Skipped {
			fmt.Fprintf(stderr, "vigil state restore: skipped %s\n", s)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "vigil state restore: %v\n", err)
		if errors.Is(err, store.ErrNoGoodCopy) {
			fmt.Fprintln(stderr, "vigil state restore: nothing was changed")
		}
		return 1
	}
	now := time.Now()
	fmt.Fprintf(stdout, "%s passed the full check: %d sites, round %d, publication %d, written %s\n",
		rep.From.Path, rep.Sites, rep.Meta.Round, rep.Meta.Publication, stateAge(rep.From.Time, now))
	switch {
	case rep.MovedAside == "":
		fmt.Fprintf(stdout, "there was no %s to keep\n", rep.Path)
	case rep.Previous != "":
		fmt.Fprintf(stdout, "moved the damaged %s aside as %s (%s)\n", rep.Path, rep.MovedAside, rep.Previous)
	default:
		fmt.Fprintf(stdout, "moved the previous %s aside as %s (it passed the structural check)\n", rep.Path, rep.MovedAside)
	}
	fmt.Fprintf(stdout, "restored %s from %s; start the agent again\n", rep.Path, rep.From.Path)
	return 0
}

func stateSize(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func stateAge(t, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format("2006-01-02 15:04:05 UTC"), d)
}
