package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/api"
)

func init() {
	register(command{
		name: "drill", synopsis: "rehearse a failover: the site's level fails by a drill, the rest is real",
		usage: "vigil drill [-level N] [-for 5m] [-detach] [-json] SITE\n       vigil drill -abort SITE",
		help: `A failover drill (docs/drills.md) gives the drilled level's origins (by
default the site's current level) down votes from the drill, before the
vote sources' own, for -for. Everything that follows is real: the failover
after unhealthy_threshold rounds, the publication, the edges applying it,
the notices (marked as a drill) and the Alertmanager alerts (labelled
drill="true"). The drill ends when -for has passed, on vigil drill -abort,
or when another level of the site really fails (the drill steps aside);
the site's failback (auto, ramp or manual) then brings it back.

It is refused when the site has no other healthy level, its health checks
are paused, a manual switch holds it, or a drill already runs.

vigil drill follows the journal until the site is back (or -detach returns
at once), then prints the drill's events and its time-to-failover report.
An interrupt (Ctrl-C) while it follows aborts the drill.`,
		run: runDrill,
	})
}

func runDrill(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("drill")
	addr, token, asJSON := clientFlags(fs)
	level := fs.Int("level", 0, "the level to drill (default: the site's current level)")
	dur := fs.Duration("for", 5*time.Minute, "how long the drill lasts (at most 24h)")
	abort := fs.Bool("abort", false, "abort the site's running drill; its failback applies from now")
	detach := fs.Bool("detach", false, "start the drill and return at once, without following it")
	wait := fs.Duration("wait", 15*time.Minute, "after the drill ends, how long to wait for the site to be back before printing the report")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: vigil drill [-level N] [-for 5m] SITE, or vigil drill -abort SITE   (for example: vigil drill -for 2m www)")
		return 2
	}
	site := pos[0]
	if *dur <= 0 {
		fmt.Fprintf(stderr, "vigil drill: -for %s: the drill needs a positive duration, such as -for 5m\n", *dur)
		return 2
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil drill: %v\n", err)
		return 2
	}
	ctx := context.Background()
	if *abort {
		d, err := c.AbortDrill(ctx, site)
		if err != nil {
			fmt.Fprintf(stderr, "vigil drill -abort: %v\n", err)
			return 1
		}
		if *asJSON {
			printDrillJSON(stdout, d)
		} else {
			fmt.Fprintf(stdout, "%s: drill of level %d aborted; the site's failback applies from now\n", site, d.Level)
		}
		return 0
	}
	// The journal's position before the drill: what follows is the drill's.
	after, err := lastSeq(ctx, c, site)
	if err != nil {
		fmt.Fprintf(stderr, "vigil drill: %v\n", err)
		return 1
	}
	d, err := c.StartDrill(ctx, site, api.DrillRequest{Level: *level, For: dur.String()})
	if err != nil {
		fmt.Fprintf(stderr, "vigil drill: %v\n", err)
		return 1
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%s: drill of level %d (%s) started by %s, until %s\n", site, d.Level, strings.Join(d.Origins, ", "), d.Actor, d.Until.Local().Format(time.RFC3339))
	}
	if *detach {
		if *asJSON {
			printDrillJSON(stdout, d)
		} else {
			fmt.Fprintf(stdout, "follow it with: vigil events -site %s -follow; abort it with: vigil drill -abort %s\n", site, site)
		}
		return 0
	}
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	follow := drillFollower{c: c, site: site, after: after, out: stdout, quiet: *asJSON}
	if err := follow.run(sigCtx, *wait); err != nil {
		if sigCtx.Err() != nil && ctx.Err() == nil {
			if _, aerr := c.AbortDrill(ctx, site); aerr != nil && !isCode(aerr, "no_drill") {
				fmt.Fprintf(stderr, "vigil drill: interrupted; the abort failed: %v (abort it with vigil drill -abort %s)\n", aerr, site)
				return 1
			}
			fmt.Fprintf(stderr, "vigil drill: interrupted: the drill of %s is aborted; its failback applies from now\n", site)
			return 1
		}
		fmt.Fprintf(stderr, "vigil drill: %v\n", err)
		return 1
	}
	return follow.report(ctx, stdout, stderr, *asJSON)
}

// lastSeq is the sequence number of the site's last journal event (0
// for none).
func lastSeq(ctx context.Context, c *api.Client, site string) (uint64, error) {
	var after uint64
	for {
		evs, err := c.Events(ctx, api.EventsQuery{After: after, Site: site, Limit: 1000})
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 {
			return after, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

func isCode(err error, code string) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == code
}

func printDrillJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

// drillFollower follows the journal of a drilled site until the drill is
// over: ended, and the site back where it started (or a real failure took
// over, or a manual failback waits for someone).
type drillFollower struct {
	c     *api.Client
	site  string
	after uint64
	out   io.Writer
	quiet bool

	events   []api.EventLine
	ended    *api.EventLine
	returned bool
}

func (f *drillFollower) run(ctx context.Context, wait time.Duration) error {
	var deadline time.Time
	for {
		evs, err := f.c.Events(ctx, api.EventsQuery{After: f.after, Site: f.site, Wait: 30 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("following the journal: %w", err)
		}
		for _, e := range evs {
			f.after = e.Seq
			f.events = append(f.events, e)
			if !f.quiet {
				fmt.Fprintf(f.out, "%s  %s%s\n", e.Time.Local().Format("15:04:05"), e.Event, drillMark(e.Event))
			}
			switch e.Event.Kind {
			case api.KindDrillEnded:
				e := e
				f.ended = &e
				deadline = time.Now().Add(wait)
			case api.KindFailbackAvailable:
				if f.ended != nil {
					return nil // manual failback: the way back waits for someone
				}
			}
		}
		if f.ended == nil {
			continue
		}
		if f.ended.Event.End == api.DrillEndSteppedAside {
			return nil
		}
		if _, err := f.c.Drill(ctx, f.site); isCode(err, "no_drill") {
			f.returned = true
			return nil
		}
		if time.Now().After(deadline) {
			if !f.quiet {
				fmt.Fprintf(f.out, "the site is not back after %s: printing what there is (vigil status %s)\n", wait, f.site)
			}
			return nil
		}
	}
}

// report prints the drill's time-to-failover report: the agent's
// (GET /v1/sites/{site}/failovers) when it has one, else the journal's
// times.
func (f *drillFollower) report(ctx context.Context, stdout, stderr io.Writer, asJSON bool) int {
	var started time.Time
	var startSeq uint64
	for _, e := range f.events {
		if e.Event.Kind == api.KindDrillStarted {
			started, startSeq = e.Time, e.Seq
			break
		}
	}
	var reports []api.FailoverReport
	list, err := f.c.Failovers(ctx, f.site, 20)
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound && ae.Code != "unknown_site":
		fmt.Fprintln(stderr, "vigil drill: the time-to-failover report is not available from this agent (GET /v1/sites/SITE/failovers answered 404): the journal's times follow")
	case err != nil:
		fmt.Fprintf(stderr, "vigil drill: reading the failover report: %v\n", err)
	default:
		for _, r := range list.Failovers {
			if r.Drill && r.Seq > startSeq {
				reports = append(reports, r)
			}
		}
	}
	if asJSON {
		printDrillJSON(stdout, drillSummary{Site: f.site, Events: f.events, Failovers: reports, Returned: f.returned})
		return 0
	}
	fmt.Fprintf(stdout, "\nDrill of %s\n", f.site)
	for _, l := range drillTimeline(f.events, started) {
		fmt.Fprintln(stdout, l)
	}
	if len(reports) > 0 {
		fmt.Fprintln(stdout)
		for i := len(reports) - 1; i >= 0; i-- { // oldest first
			if i < len(reports)-1 {
				fmt.Fprintln(stdout)
			}
			writeFailoverReport(stdout, &reports[i])
		}
	}
	return 0
}

// drillSummary is what vigil drill -json prints at the end.
type drillSummary struct {
	Site string `json:"site"`
	// Returned is true when the site came back where the drill started.
	Returned  bool                 `json:"returned"`
	Events    []api.EventLine      `json:"events"`
	Failovers []api.FailoverReport `json:"failovers"`
}

// drillTimeline is the drill's journal, each event with its time from
// the drill's start.
func drillTimeline(events []api.EventLine, started time.Time) []string {
	var out []string
	for _, e := range events {
		rel := ""
		if !started.IsZero() {
			rel = fmt.Sprintf("+%-8s", e.Time.Sub(started).Round(time.Millisecond))
		}
		who := ""
		if e.Actor != "" {
			who = " by " + e.Actor
		}
		out = append(out, fmt.Sprintf("  %s %s  %s%s%s", e.Time.UTC().Format("15:04:05.000"), rel, e.Event, drillMark(e.Event), who))
	}
	return out
}

// drillMark is " [drill]" for an event marked as a drill's.
func drillMark(e api.Event) string {
	if e.Drill {
		return " [drill]"
	}
	return ""
}
