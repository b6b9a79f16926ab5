package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/decide"
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
recorded rounds per site and origin, with the journal's events, as JSON
lines: the input of vigil simulate -history. The journal comes from the
state file, or, while an agent holds it, through that agent's API
(-address, -token; with -config its api block's listen address and token).
The file keeps only hashes of the names: with -config they come from the
configuration, with -data-dir from the state file or the running agent.
See docs/replay.md.`,
		run: runHistoryExport,
	})
}

func runHistoryExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("history export")
	dataDir := fs.String("data-dir", "", "the agent's data directory (control { data_dir }; default \""+config.DefaultDataDir+"\")")
	cfgPath := fs.String("config", "", "read data_dir, the names and the chain from this configuration file or folder")
	outPath := fs.String("o", "", "the file to write (required; - for standard output)")
	agentFlags(fs)
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
	x, err := exportHistory(dir, cfg, agentClient(fs, cfg))
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
// dir's state file when cfg is nil. The journal (and, without cfg, the
// names) come from the state file, or, while an agent holds it, through
// the agent's API with c (nil: not tried).
func exportHistory(dir string, cfg *config.Config, c *api.Client) (*simulate.Export, error) {
	snap, err := history.ReadSnapshot(filepath.Join(dir, engine.HistoryFile))
	if err != nil {
		return nil, err
	}
	state, events, why := readState(dir)
	var agentNames []simulate.Names
	if state == nil && strings.HasPrefix(why, whyInUse) && c != nil {
		n, evs, err := readAgent(c)
		if err != nil {
			why += "; nor through the agent's API at " + c.Address() + ": " + err.Error()
		} else {
			agentNames, events, why = n, evs, "included"
		}
	}
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
	case agentNames != nil:
		h.Names, names = "running agent", agentNames
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
			return nil, nil, whyInUse + "; give its API with -address and -token (or -config), or stop it"
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

// whyInUse starts the journal's note when an agent holds the state file.
const whyInUse = "not read: an agent holds the state file"

// agentFlags adds -address and -token: the API of the agent that holds
// the state file, through which the journal is read while it runs.
func agentFlags(fs *flag.FlagSet) {
	fs.String("address", os.Getenv("VIGIL_ADDR"), "the API of the agent that holds the state file (env VIGIL_ADDR; default the -config api block's listen, else "+api.DefaultAddress+")")
	fs.String("token", "", "its API token (env VIGIL_TOKEN; default the -config api block's token_env or token_file)")
}

// agentClient is the client of the running agent's API that agentFlags
// and cfg (nil: none) name.
func agentClient(fs *flag.FlagSet, cfg *config.Config) *api.Client {
	addr, token := fs.Lookup("address").Value.String(), fs.Lookup("token").Value.String()
	if token == "" {
		token = os.Getenv("VIGIL_TOKEN")
	}
	if cfg != nil {
		a := cfg.Control.API
		if addr == "" && a.Listen != "" && !strings.HasSuffix(a.Listen, ":0") {
			addr = "http://" + a.Listen
			if a.TLS != nil {
				addr = "https://" + a.Listen
			}
		}
		if token == "" && a.TokenEnv != "" {
			token = os.Getenv(a.TokenEnv)
		}
		if token == "" && a.TokenFile != "" {
			if b, err := os.ReadFile(a.TokenFile); err == nil {
				token = strings.TrimSpace(string(b))
			}
		}
	}
	if addr == "" {
		addr = api.DefaultAddress
	}
	c := api.NewClient(addr, token)
	c.Actor = actorName()
	return c
}

// readAgent reads the names of every site's origins and the whole
// journal through a running agent's API.
func readAgent(c *api.Client) ([]simulate.Names, []store.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var names []simulate.Names
	for cursor := ""; ; {
		page, err := c.Sites(ctx, api.SitesQuery{Cursor: cursor, Limit: 1000})
		if err != nil {
			return nil, nil, fmt.Errorf("reading the sites: %w", err)
		}
		for _, s := range page.Sites {
			for o := range s.Origins {
				names = append(names, simulate.Names{Site: s.Site, Origin: o})
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	events := []store.Event{}
	const page = 10000
	for after := uint64(0); ; {
		lines, err := c.Events(ctx, api.EventsQuery{After: after, Limit: page})
		if err != nil {
			return nil, nil, fmt.Errorf("reading the journal: %w", err)
		}
		for _, l := range lines {
			b, err := json.Marshal(l.Event)
			if err != nil {
				return nil, nil, fmt.Errorf("journal event %d: %w", l.Seq, err)
			}
			var ev decide.Event
			if err := json.Unmarshal(b, &ev); err != nil {
				return nil, nil, fmt.Errorf("journal event %d: %w", l.Seq, err)
			}
			events = append(events, store.Event{Seq: l.Seq, Time: l.Time, Site: l.Site, Round: l.Round, Actor: l.Actor, Event: ev})
			after = l.Seq
		}
		if len(lines) < page {
			break
		}
	}
	return names, events, nil
}
