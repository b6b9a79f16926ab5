package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigilcdn/vigil/api"
)

func init() {
	register(command{
		name: "status", synopsis: "show the origin status card of every site, or of one",
		usage: "vigil status [SITE] [-all | -problems | -status S,... | -prefix P] [-json]",
		help: `A fleet of more than 20 sites prints its summary (the sites by status, off
the top level, with every level unhealthy, waiting for a manual failback)
and the sites that need attention; -all prints every site. -problem is the
older spelling of -problems.

Vote sources in trouble are listed first: a source that failed the latest
round that asked it (a crash, a timeout or the plugin's own error), with
its error and how many of its recent rounds failed.

With -problems the exit status says whether anything needs attention, as
a Nagios check does, and the first line says it in words (the report
follows):
  0  OK: no site and no vote source needs attention
  1  WARNING: a site is failed over, degraded or paused, or a vote source
     failed its latest round
  2  CRITICAL: a site is down (no level is healthy)
  3  UNKNOWN: the agent could not be asked
Without -problems the exit status is 0, or 1 when the agent could not be
asked.`,
		run: runStatus,
	})
}

// statusPageSize is how many sites one request of vigil status asks for.
const statusPageSize = 500

// smallFleet is the size up to which vigil status prints every site by
// default; a larger fleet gets its summary and the sites that need
// attention (-all prints them all).
const smallFleet = 20

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("status")
	addr, token, asJSON := clientFlags(fs)
	all := fs.Bool("all", false, "print every site (by default a fleet of more than 20 sites shows only those that need attention)")
	problems := fs.Bool("problems", false, "print only the sites that need attention (down, failed over, degraded or paused) and exit as a Nagios check does (see above)")
	problemAlias := fs.Bool("problem", false, "the same as -problems")
	status := fs.String("status", "", "print only the sites with these statuses, such as failed_over,down (ok, unknown, paused, degraded, failed_over, down)")
	prefix := fs.String("prefix", "", "print only the sites whose name starts with this")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	problem := new(bool)
	*problem = *problems || *problemAlias
	// A check's status is its first line, as Nagios reads it: with
	// -problems the report is held back until the verdict is known, and
	// printed after the verdict's line.
	out := stdout
	var held *bytes.Buffer
	if *problem && !*asJSON {
		held = &bytes.Buffer{}
		stdout = held
	}
	verdict := func(chk *check, asJSON bool) int {
		code := chk.verdict(out, asJSON)
		if held != nil {
			_, _ = held.WriteTo(out)
		}
		return code
	}
	// fail is the exit status of a failed request: UNKNOWN for a check.
	fail := func(code int) int {
		if *problem {
			if held != nil {
				_, _ = held.WriteTo(out)
			}
			return checkUnknown
		}
		return code
	}
	if len(pos) > 1 {
		fmt.Fprintln(stderr, "usage: vigil status [SITE] [-all | -problems | -status S,... | -prefix P] [-json]")
		return fail(2)
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil status: %v\n", err)
		return fail(2)
	}
	ctx := context.Background()
	var chk check
	sources, err := c.Sources(ctx)
	if err != nil {
		// The sites may still answer (an older agent): say so and go on;
		// a check that cannot see the sources is UNKNOWN unless CRITICAL.
		fmt.Fprintf(stderr, "vigil status: the vote sources are unknown: %v\n", err)
		chk.sourcesUnknown = true
	}
	for _, s := range sources {
		if s.Failing() {
			chk.failingSources++
		}
	}
	if len(pos) == 1 {
		var raw json.RawMessage
		if err := c.Do(ctx, "GET", "/v1/sites/"+url.PathEscape(pos[0]), nil, &raw); err != nil {
			fmt.Fprintf(stderr, "vigil status: %v\n", err)
			return fail(1)
		}
		var v api.SiteView
		if err := json.Unmarshal(raw, &v); err != nil {
			fmt.Fprintf(stderr, "vigil status: %v\n", err)
			return fail(1)
		}
		chk.site(&v)
		if *asJSON {
			printJSON(stdout, raw)
		} else {
			writeClusterLine(ctx, c, stdout)
			writeSources(stdout, sources, time.Now())
			writeCard(stdout, &v, time.Now())
			writeNodes(ctx, c, stdout)
		}
		if *problem {
			return verdict(&chk, *asJSON)
		}
		return 0
	}
	q := api.SitesQuery{Prefix: *prefix, Problem: *problem, Limit: statusPageSize}
	if *status != "" {
		q.Statuses = strings.Split(*status, ",")
	}
	// The first page says how big the fleet is.
	first, err := c.Sites(ctx, q)
	if err != nil {
		fmt.Fprintf(stderr, "vigil status: %v\n", err)
		return fail(1)
	}
	fleet := 0
	for _, n := range first.Counts {
		fleet += n
	}
	summarize := !*all && !*asJSON && !*problem && *status == "" && *prefix == "" && fleet > smallFleet
	if summarize {
		q.Problem = true
		if first, err = c.Sites(ctx, q); err != nil {
			fmt.Fprintf(stderr, "vigil status: %v\n", err)
			return fail(1)
		}
	}
	if *asJSON {
		if code := statusJSON(ctx, c, q, first, stdout, stderr, chk.site); code != 0 {
			return fail(code)
		}
		if *problem {
			return verdict(&chk, true)
		}
		return 0
	}
	writeClusterLine(ctx, c, stdout)
	writeSources(stdout, sources, time.Now())
	if summarize || fleet > smallFleet {
		fmt.Fprintf(stdout, "%s\n", fleetSummary(first.Counts))
		if sum, err := c.Summary(ctx); err == nil {
			fmt.Fprintf(stdout, "%s\n", summaryFacts(sum))
		}
		fmt.Fprintln(stdout)
	}
	printed := 0
	for p := first; ; {
		for _, s := range p.Sites {
			if printed > 0 {
				fmt.Fprintln(stdout)
			}
			writeCard(stdout, s, time.Now())
			chk.site(s)
			printed++
		}
		if p.NextCursor == "" {
			break
		}
		if p, err = nextPage(ctx, c, q, p); err != nil {
			fmt.Fprintf(stderr, "vigil status: %v\n", err)
			return fail(1)
		}
	}
	if summarize {
		if printed == 0 {
			fmt.Fprintln(stdout, "No site needs attention.")
		}
		fmt.Fprintf(stdout, "\n(%d of %d sites need attention; vigil status -all prints every site)\n", printed, fleet)
	}
	writeNodes(ctx, c, stdout)
	if *problem {
		return verdict(&chk, false)
	}
	return 0
}

// nextPage reads the page after p, with the same query.
func nextPage(ctx context.Context, c *api.Client, q api.SitesQuery, p *api.SitesPage) (*api.SitesPage, error) {
	q.Cursor = p.NextCursor
	return c.Sites(ctx, q)
}

// statusJSON prints every matching site as one JSON object, the shape of
// GET /v1/sites, a page at a time.
func statusJSON(ctx context.Context, c *api.Client, q api.SitesQuery, p *api.SitesPage, stdout, stderr io.Writer, seen func(*api.SiteView)) int {
	counts, _ := json.Marshal(p.Counts)
	fmt.Fprintf(stdout, "{\n  \"round\": %d,\n  \"publication\": %d,\n  \"total\": %d,\n  \"counts\": %s,\n  \"sites\": [", p.Round, p.Publication, p.Total, counts)
	n := 0
	for {
		for _, s := range p.Sites {
			b, err := json.MarshalIndent(s, "    ", "  ")
			if err != nil {
				fmt.Fprintf(stderr, "vigil status: %v\n", err)
				return 1
			}
			seen(s)
			if n > 0 {
				fmt.Fprint(stdout, ",")
			}
			fmt.Fprintf(stdout, "\n    %s", b)
			n++
		}
		if p.NextCursor == "" {
			break
		}
		var err error
		if p, err = nextPage(ctx, c, q, p); err != nil {
			fmt.Fprintf(stderr, "vigil status: %v\n", err)
			return 1
		}
	}
	fmt.Fprint(stdout, "\n  ]\n}\n")
	return 0
}

// fleetSummary is the fleet in one line: "1204 sites: 4 down, 10 failed
// over, 1190 ok".
func fleetSummary(counts map[string]int) string {
	total := 0
	var parts []string
	for _, st := range api.Statuses {
		if n := counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ReplaceAll(st, "_", " ")))
		}
		total += counts[st]
	}
	return fmt.Sprintf("%d sites: %s", total, strings.Join(parts, ", "))
}

// summaryFacts is the summary's second line: "13 off the top level, 1
// with every level unhealthy, 3 waiting for a manual failback; each site
// probed every 10m0s" (the scheduler's full cycle, when the agent says).
func summaryFacts(s *api.FleetSummary) string {
	line := fmt.Sprintf("%d off the top level, %d with every level unhealthy, %d waiting for a manual failback",
		s.OffTopLevel, s.AllUnhealthy, s.FailbackWaiting)
	if s.CycleSeconds > 0 {
		cycle := time.Duration(s.CycleSeconds * float64(time.Second)).Round(time.Millisecond)
		line += fmt.Sprintf("; each site probed every %s", cycle)
		if s.RoundSitesAuto {
			line += fmt.Sprintf(" (sites_per_round auto: %d sites last round)", s.RoundSites)
		}
	}
	return line
}

// writeNodes prints what the sources report about themselves (the node
// gateway's nodes), when any does.
func writeNodes(ctx context.Context, c *api.Client, w io.Writer) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
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
		for _, n := range append(append([]api.NodeView{}, nodes.Nodes...), nodes.Offline...) {
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

// failbackWords is the configured failback and, apart from it, the
// manual hold: "failback auto", or "failback auto, held on level 2 by a
// manual switch (vigil switch www 1 releases it)".
func failbackWords(s *api.SiteView) string {
	w := "failback " + s.Failback
	if s.ManualHold {
		top := topLevel(s)
		w += fmt.Sprintf(", held on level %d by a manual switch (vigil switch %s %d releases it)", s.Level, s.Site, top)
	}
	return w
}

func topLevel(s *api.SiteView) int { return s.TopLevel() }

// counterWords is an origin's consecutive counter against its threshold:
// "1/3 failed" (one more of three failed rounds and it is unhealthy), "1/2
// good", or "-" before any verdict.
func counterWords(o api.OriginView, t api.Thresholds) string {
	switch {
	case o.State == "disabled":
		return "-"
	case o.Failures > 0:
		return fmt.Sprintf("%d/%d failed", o.Failures, t.Unhealthy)
	case o.Successes > 0:
		return fmt.Sprintf("%d/%d good", o.Successes, t.Healthy)
	}
	return "-"
}

// inWords is a time ahead from now: "in 40 s", "in 3 min 05 s", or "at
// the next round" once it has passed.
func inWords(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "at a time unknown"
	}
	d := t.Sub(now).Round(time.Second)
	switch {
	case d <= 0:
		return "at the next round"
	case d < time.Minute:
		return fmt.Sprintf("in %d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("in %d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return "at " + until(t)
}

// until formats a time ahead.
func until(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "unknown"
	}
	return t.Local().Format("15:04:05")
}

// writeCard prints the origin status card of one site.
func writeCard(w io.Writer, s *api.SiteView, now time.Time) {
	probing := "probed " + ago(s.LastProbe, now)
	if s.Probing == "paused" {
		probing = "health checks paused: " + s.PausedWhy
	}
	fmt.Fprintf(w, "%s (%s)  level %d  %s  %s  publication v%d\n", s.Site, s.Hostname, s.Level, failbackWords(s), probing, s.Publication)
	if r := s.Ramp; r != nil {
		step := ""
		if r.Step > 0 && r.Steps > 0 {
			step = fmt.Sprintf("ramp step %d/%d: ", r.Step, r.Steps)
		}
		fmt.Fprintf(w, "  %s%d%% of new requests to level %d, the rest on level %d; next step %s while level %d is healthy (docs/antiflap.md)\n", step, r.Weight, s.Level, r.From, inWords(r.NextStepAt, now), s.Level)
	}
	if x := s.Waiting; x != nil {
		switch x.Why {
		case api.WaitingDwell:
			fmt.Fprintf(w, "  failback to level %d %s (dwell): level %d is healthy; %s fails back now\n", x.Level, inWords(x.Until, now), x.Level, x.Command)
		default:
			fmt.Fprintf(w, "  manual failback waiting: level %d is healthy; run %s\n", x.Level, x.Command)
		}
	}
	if d := s.Drill; d != nil {
		fmt.Fprintf(w, "  drill of level %d running, until %s (vigil drill -abort %s ends it)\n", d.Level, until(d.Until), s.Site)
	}
	if d := s.DNSUpdate; d != nil {
		fmt.Fprintf(w, "  dns update: %s\n", dnsUpdateWords(d, now))
	}
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
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\tsince %s\tverdict %s\tby %s\t%s\n", n, o.Address, mark(o.State), counterWords(o, s.Thresholds), ago(o.Since, now), o.Verdict, by, o.Reason)
			if o.Flapping {
				fmt.Fprintf(tw, "    \t  flapping since %s: held unhealthy until %s at least (docs/antiflap.md)\n", ago(o.FlappingSince, now), until(o.FlappingUntil))
			}
			for _, p := range o.Partitions {
				fmt.Fprintf(tw, "    \t  path partition suspected: every voter of %s votes down, the others up (%d rounds, since %s; docs/partition.md)\n", p.Group, p.Rounds, ago(&p.Since, now))
			}
			if o.QuarantineUntil != nil && o.QuarantineUntil.After(now) {
				fmt.Fprintf(tw, "    \t  quarantined until %s\n", until(o.QuarantineUntil))
			}
			if len(o.Votes) > 0 {
				var parts []string
				for _, v := range o.Votes {
					p := fmt.Sprintf("%s/%s %s", v.Source, v.Voter, v.Value)
					switch {
					case v.PluginReason != "":
						p += " (" + v.Reason + " " + v.PluginReason + ")"
					case v.Reason != "ok" && v.Reason != "":
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

// dnsUpdateWords says how the dynamic update of a site's name stands
// (publish "dns_update", docs/dns.md).
func dnsUpdateWords(d *api.DNSUpdateView, now time.Time) string {
	switch d.State {
	case api.DNSUpdateOK:
		return fmt.Sprintf("%s ok, publication v%d pushed %s", d.Name, d.Version, ago(d.At, now))
	case api.DNSUpdatePending:
		return d.Name + " not pushed yet"
	case api.DNSUpdateSkipped:
		return d.Name + " not pushed: " + d.Error
	case api.DNSUpdateStandby:
		return d.Name + " pushed by the cluster's leader, not this instance (ask the leader)"
	}
	return fmt.Sprintf("%s %s (publication v%d, %s; %s so far): %s", d.Name, strings.ToUpper(d.State), d.Version, ago(d.At, now), plural(int(d.Failures), "failed update"), d.Error)
}

// The exit statuses of vigil status -problems, those of a Nagios check.
const (
	checkOK       = 0
	checkWarning  = 1
	checkCritical = 2
	checkUnknown  = 3
)

// check gathers what vigil status -problems judges: the sites it listed
// and the vote sources failing now.
type check struct {
	down, attention int // sites down; other sites that need attention
	failingSources  int
	sourcesUnknown  bool // GET /v1/sources failed
}

// site counts one listed site.
func (c *check) site(s *api.SiteView) {
	switch s.Status {
	case "down":
		c.down++
	case "failed_over", "degraded", "paused":
		c.attention++
	}
}

// verdict prints the check's line, which the report follows (not in
// JSON, whose output is one JSON value), and returns its exit status.
func (c *check) verdict(w io.Writer, asJSON bool) int {
	code, word := checkOK, "OK"
	switch {
	case c.down > 0:
		code, word = checkCritical, "CRITICAL"
	case c.sourcesUnknown:
		code, word = checkUnknown, "UNKNOWN"
	case c.attention > 0 || c.failingSources > 0:
		code, word = checkWarning, "WARNING"
	}
	if asJSON {
		return code
	}
	var parts []string
	if c.down > 0 {
		parts = append(parts, plural(c.down, "site")+" down")
	}
	if c.attention > 0 {
		parts = append(parts, plural(c.attention, "site")+" failed over, degraded or paused")
	}
	if c.failingSources > 0 {
		parts = append(parts, plural(c.failingSources, "vote source")+" failing")
	}
	if c.sourcesUnknown {
		parts = append(parts, "the vote sources could not be read")
	}
	if len(parts) == 0 {
		parts = append(parts, "no site and no vote source needs attention")
	}
	// The first line, before the report it judges (a blank line between).
	fmt.Fprintf(w, "%s: %s\n\n", word, strings.Join(parts, ", "))
	return code
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// writeSources lists the vote sources in trouble: those that failed the
// latest round that asked them, and those answering again after failures
// among their recent rounds. It prints nothing when every source is well.
func writeSources(w io.Writer, sources []api.SourceInfo, now time.Time) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	n := 0
	for _, s := range sources {
		if !s.Failing() && s.RecentFailures == 0 {
			continue
		}
		n++
		state := fmt.Sprintf("✕ failing: %s in a row", plural(s.FailingRounds, "round"))
		if !s.Failing() {
			state = "● answering again"
		}
		fmt.Fprintf(tw, "source %s\t%s\t%d of its last %d rounds failed\tlast error %s: %s\n",
			s.Name, state, s.RecentFailures, s.RecentRounds, ago(s.LastErrorAt, now), s.LastError)
	}
	tw.Flush()
	if n > 0 {
		fmt.Fprintln(w, "  (a failing source's origins pass on to the next source of the chain; vigil probe SITE shows it, the agent's log has more)")
		fmt.Fprintln(w)
	}
}
