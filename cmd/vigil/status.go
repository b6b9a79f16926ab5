package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigilcdn/vigil/core/engine"
)

func init() {
	register("status", "show the origin status card of every site, or of one", runStatus)
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr, token, asJSON := clientFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintln(stderr, "usage: vigil status [SITE] [-json]")
		return 2
	}
	c := newClient(*addr, *token)
	ctx := context.Background()
	var raw json.RawMessage
	path := "/v1/sites"
	if len(pos) == 1 {
		path += "/" + pos[0]
	}
	if err := c.do(ctx, "GET", path, nil, &raw); err != nil {
		fmt.Fprintf(stderr, "vigil status: %v\n", err)
		return 1
	}
	if *asJSON {
		printJSON(stdout, raw)
		return 0
	}
	var sites []*engine.SiteView
	if len(pos) == 1 {
		var v engine.SiteView
		if err := json.Unmarshal(raw, &v); err != nil {
			fmt.Fprintf(stderr, "vigil status: %v\n", err)
			return 1
		}
		sites = append(sites, &v)
	} else {
		var all struct {
			Sites []*engine.SiteView `json:"sites"`
		}
		if err := json.Unmarshal(raw, &all); err != nil {
			fmt.Fprintf(stderr, "vigil status: %v\n", err)
			return 1
		}
		sites = all.Sites
	}
	writeClusterLine(ctx, c, stdout)
	for i, s := range sites {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeCard(stdout, s, time.Now())
	}
	writeNodes(ctx, c, stdout)
	return 0
}

// writeNodes prints what the sources report about themselves (the node
// gateway's nodes), when any does.
func writeNodes(ctx context.Context, c *client, w io.Writer) {
	var nodes struct {
		Nodes   []engine.NodeView     `json:"nodes"`
		Offline []engine.NodeView     `json:"offline"`
		Sources []engine.SourceStatus `json:"sources"`
	}
	if err := c.do(ctx, "GET", "/v1/nodes", nil, &nodes); err != nil {
		return // no source reports nodes, or an older agent
	}
	now := time.Now()
	for _, s := range nodes.Sources {
		fmt.Fprintln(w)
		if s.Error != "" {
			fmt.Fprintf(w, "source %s: status unavailable: %s\n", s.Source, s.Error)
			continue
		}
		fmt.Fprintf(w, "source %s: %s\n", s.Source, s.Summary)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, n := range append(append([]engine.NodeView{}, nodes.Nodes...), nodes.Offline...) {
			if n.Source != s.Source {
				continue
			}
			var labels []string
			for k, v := range n.Labels {
				labels = append(labels, k+"="+v)
			}
			sort.Strings(labels)
			state := "● " + n.State
			if n.State != "online" {
				state = "✕ " + n.State
			}
			fmt.Fprintf(tw, "  %s	%s	%s	last seen %s\n", n.ID, state, strings.Join(labels, ","), ago(n.LastSeen, now))
		}
		tw.Flush()
	}
}

// mark gives every state a text sign, so colour is never the only signal.
func mark(state string) string {
	switch state {
	case "healthy":
		return "● healthy"
	case "unhealthy":
		return "✕ unhealthy"
	case "disabled":
		return "– disabled"
	default:
		return "? " + state
	}
}

func ago(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	d := now.Sub(*t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return t.Format(time.RFC3339)
}

// writeCard prints the origin status card of one site.
func writeCard(w io.Writer, s *engine.SiteView, now time.Time) {
	probing := "probed " + ago(s.LastProbe, now)
	if s.Probing == "paused" {
		probing = "health checks paused: " + s.PausedWhy
	}
	fmt.Fprintf(w, "%s (%s)  level %d  failback %s  %s  publication v%d\n", s.Site, s.Hostname, s.Level, s.Failback, probing, s.Publication)
	levels := make([]int, 0, len(s.Levels))
	for l := range s.Levels {
		n, _ := strconv.Atoi(l)
		levels = append(levels, n)
	}
	sort.Ints(levels)
	names := make([]string, 0, len(s.Origins))
	for n := range s.Origins {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, l := range levels {
		cur := ""
		if l == s.Level {
			cur = "  ◀ current"
		}
		fmt.Fprintf(tw, "  level %d\t%s%s\n", l, mark(s.Levels[strconv.Itoa(l)]), cur)
		for _, n := range names {
			o := s.Origins[n]
			if o.Level != l {
				continue
			}
			by := "-"
			if o.By != nil {
				by = *o.By
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\tsince %s\tverdict %s\tby %s\t%s\n", n, o.Address, mark(o.State), ago(o.Since, now), o.Verdict, by, o.Reason)
			if len(o.Votes) > 0 {
				var parts []string
				for _, v := range o.Votes {
					p := fmt.Sprintf("%s/%s %s", v.Source, v.Voter, v.Value)
					if v.Reason != "ok" && v.Reason != "" {
						p += " (" + v.Reason + ")"
					}
					parts = append(parts, p)
				}
				fmt.Fprintf(tw, "    \t  votes: %s\n", strings.Join(parts, ", "))
			}
		}
	}
	tw.Flush()
}
