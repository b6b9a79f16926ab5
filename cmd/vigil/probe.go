package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
)

func init() {
	register(command{
		name: "probe", synopsis: "run one real round for a site through the chain, changing nothing: why is my origin failing?",
		usage: "vigil probe [-config PATH] SITE [-json]",
		help: `Without -config it asks the running agent, whose plugins (and attached
nodes) vote; the agent needs its API token for this, although nothing is
saved. With -config it launches the chain's plugins here instead.

A source that failed in the probe (a crash, a timeout or the plugin's own
error) gave no votes: it is named at the end with its error, and under
"failed" in -json.`,
		run: runProbe,
	})
}

func runProbe(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("probe")
	path := fs.String("config", "", "configuration file or folder: launch the chain's plugins here (without it, ask the running agent)")
	addr, token, asJSON := clientFlags(fs)
	verbose := fs.Bool("v", false, "show the plugins' logs")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	site := ""
	if len(pos) == 1 {
		site = pos[0]
	}
	if site == "" {
		fmt.Fprintln(stderr, "usage: vigil probe [-config PATH] SITE [-json]   (without -config: ask the running agent)")
		return 2
	}
	if *path == "" {
		c, err := newClient(fs, *addr, *token)
		if err != nil {
			fmt.Fprintf(stderr, "vigil probe: %v\n", err)
			return 2
		}
		res, err := c.Probe(context.Background(), site)
		if err != nil {
			fmt.Fprintf(stderr, "vigil probe: %v\n", err)
			return 1
		}
		return printProbe(stdout, res, nil, *asJSON)
	}
	cfg, diags := config.Load(*path)
	if diags.HasErrors() {
		_ = config.WriteDiagnostics(stderr, cfg.Files, diags)
		return 1
	}
	cs := cfg.Site(site)
	if cs == nil {
		names := make([]string, len(cfg.Sites))
		for i, s := range cfg.Sites {
			names[i] = s.Name
		}
		fmt.Fprintf(stderr, "vigil probe: no site %s (sites: %s)\n", site, strings.Join(names, ", "))
		return 1
	}
	level := hclog.Warn
	if *verbose {
		level = hclog.Debug
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "vigil", Level: level, Output: stderr})
	ctx := context.Background()
	uses := map[string]bool{}
	for _, n := range cs.Sources {
		uses[n] = true
	}
	sources := make([]engine.VoteSource, len(cfg.Sources))
	for i, s := range cfg.Sources {
		if !uses[s.Name] {
			sources[i] = idleSource{s.Name}
			continue
		}
		src := engine.PluginSource(s, cfg.Control.PluginDir, log)
		if d := src.Start(ctx); d.HasErrors() {
			_ = config.WriteDiagnostics(stderr, cfg.Files, d)
			for _, started := range sources[:i] {
				started.Close()
			}
			return 1
		}
		sources[i] = src
	}
	defer func() {
		for _, s := range sources {
			s.Close()
		}
	}()
	res, err := engine.Probe(ctx, cfg, site, sources, log)
	if err != nil {
		fmt.Fprintf(stderr, "vigil probe: %v\n", err)
		return 1
	}
	return printProbe(stdout, res, cs.Sources, *asJSON)
}

func printProbe(stdout io.Writer, res *api.ProbeResult, chain []string, asJSON bool) int {
	if asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	through := "the agent's chain"
	if chain != nil {
		through = strings.Join(chain, " → ")
	}
	fmt.Fprintf(stdout, "%s (%s): one dry-run round through %s; nothing is saved\n", res.Site, res.Hostname, through)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	var hints []string
	for _, o := range res.Origins {
		if !o.Enabled {
			fmt.Fprintf(tw, "%s\tlevel %d\t%s\tdisabled: not probed\n", o.Origin, o.Level, o.Address)
			continue
		}
		by := "no source settled it"
		if o.By != nil {
			by = "settled by " + *o.By
		}
		fmt.Fprintf(tw, "%s\tlevel %d\t%s\tverdict %s\t%s\tasked %s\n", o.Origin, o.Level, o.Address, o.Verdict, by, strings.Join(o.Asked, ", "))
		if len(o.Votes) == 0 {
			fmt.Fprintf(tw, "\t\t\tno votes\n")
		}
		for _, v := range o.Votes {
			detail := v.Reason
			if v.PluginReason != "" {
				detail += " " + v.PluginReason
			}
			if v.Detail != "" {
				detail += ": " + v.Detail
			}
			fmt.Fprintf(tw, "\t%s/%s\t%s\t%s\t%.1f ms\n", v.Source, v.Voter, v.Value, detail, v.LatencyMS)
		}
		if hint := clientErrorHint(o.Votes); hint != "" {
			hints = append(hints, o.Origin+": "+hint)
		}
	}
	tw.Flush()
	for _, h := range hints {
		fmt.Fprintf(stdout, "hint: %s\n", h)
	}
	if len(res.Failed) > 0 {
		fmt.Fprintln(stdout, "\nsources that failed this round (no votes; their origins passed on to the next source):")
		tw = tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		for _, f := range res.Failed {
			fmt.Fprintf(tw, "  ✕ %s\t%s\n", f.Source, f.Error)
		}
		tw.Flush()
	}
	return 0
}

// clientStatus is the HTTP status of a probe's detail when it is a 4xx:
// "HTTP 404 Not Found" as sdk/probe (the direct source, the nodes) writes
// it, "status 404" as the dnspup source does.
var clientStatus = regexp.MustCompile(`^(?:HTTP|status) (4[0-9][0-9])\b`)

// clientErrorHint is the hint for an origin that some voter found up on
// a 4xx answer: below 500 is up unless the site sets expected_status, and
// a 4xx to the health check is most often a mistyped path. Empty when no
// up vote was a 4xx.
func clientErrorHint(votes []api.VoteView) string {
	for _, v := range votes {
		if v.Value != "up" {
			continue
		}
		if m := clientStatus.FindStringSubmatch(v.Detail); m != nil {
			return fmt.Sprintf("HTTP %s counts as up: is the health path right? "+
				"health_check { expected_status = [200] } makes only the listed statuses count as up.", m[1])
		}
	}
	return ""
}
