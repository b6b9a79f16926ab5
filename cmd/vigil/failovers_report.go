package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/vigilcdn/vigil/api"
)

// writeFailoverReports prints a site's failover reports as text, newest
// first, as `vigil failovers` does; `vigil drill` may print its own with
// writeFailoverReport.
func writeFailoverReports(w io.Writer, list *api.FailoverReportList) {
	if len(list.Failovers) == 0 {
		fmt.Fprintf(w, "Site %s has no failover on record (the journal keeps each one's report once its nodes reported).\n", list.Site)
		return
	}
	for i := range list.Failovers {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeFailoverReport(w, &list.Failovers[i])
	}
}

// writeFailoverReport prints one failover's report: each step with its
// time and its duration, then one line per node.
func writeFailoverReport(w io.Writer, r *api.FailoverReport) {
	secs := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.3fs", *p)
	}
	at := func(t *api.ReportTime) string {
		if t == nil {
			return "not known"
		}
		return t.String()
	}
	kind := "Failover"
	if r.Drill {
		kind = "Drill failover"
	}
	fmt.Fprintf(w, "%s of %s, level %d -> %d (journal seq %d, round %d)", kind, r.Site, r.FromLevel, r.ToLevel, r.Seq, r.Round)
	if !r.Complete {
		fmt.Fprint(w, ", waiting for the nodes' reports")
	}
	fmt.Fprintln(w)
	origin := ""
	if r.Origin != "" {
		origin = " (origin " + r.Origin + ")"
	}
	fmt.Fprintf(w, "  first failed verdict  %s%s\n", at(r.FirstFailure), origin)
	fmt.Fprintf(w, "  decided               %s  detect   %s\n", r.Decided, secs(r.DetectSeconds))
	fmt.Fprintf(w, "  committed             %s  commit   %s\n", at(r.Committed), secs(r.CommitSeconds))
	pub := at(r.Published)
	if r.Published != nil {
		pub += fmt.Sprintf("  publish  %s  (version %d)", secs(r.PublishSeconds), r.Publication)
	}
	fmt.Fprintf(w, "  published             %s\n", pub)
	if r.EdgeSeconds != nil {
		fmt.Fprintf(w, "  last edge applied     edge     %s  total %s from the first failed verdict\n", secs(r.EdgeSeconds), secs(r.TotalSeconds))
	}
	if len(r.Nodes) == 0 {
		fmt.Fprintln(w, "  no node has reported applying a publication to this agent")
		return
	}
	width := 4
	for _, n := range r.Nodes {
		width = max(width, len(n.Node))
	}
	fmt.Fprintf(w, "  %-*s  %-24s  %-8s  %-24s  %-10s  %s\n", width, "node", "applied", "edge", "last request to level "+fmt.Sprint(r.FromLevel), "errors", "result")
	for _, n := range r.Nodes {
		if !n.Reported {
			fmt.Fprintf(w, "  %-*s  not reported\n", width, n.Node)
			continue
		}
		last, errs := "-", "-"
		if n.Proxying {
			last = "none"
			if n.LastRequest != nil {
				last = n.LastRequest.String()
			}
			errs = fmt.Sprintf("%d of %d", n.VisitorErrors, n.VisitorRequests)
		}
		result := n.Result
		if n.Version != r.Publication && r.Publication != 0 {
			result += fmt.Sprintf(" (version %d)", n.Version)
		}
		fmt.Fprintf(w, "  %-*s  %-24s  %-8s  %-24s  %-10s  %s\n", width, n.Node, at(n.Applied), secs(n.EdgeSeconds), last, errs, strings.TrimSpace(result))
	}
}
