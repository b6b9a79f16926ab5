package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/sdk"
)

func init() {
	register(command{
		name: "plugin list", synopsis: "list the agent's vote sources: plugin, version, protocol, SDK, capabilities, process, last error",
		usage: "vigil plugin list [-address ADDR] [-token TOKEN] [-json]",
		help: `Asks the running agent (GET /v1/sources) for the sources of its vote
chain, in chain order, and prints for each its plugin's name and version,
the vote-source protocol agreed with it, the SDK it was built with, the
capabilities it declared, its process id (- while none runs), how often it
was restarted, how many targets the agent abstained on for it because
they need a capability it lacks, and its latest error. -json prints the
API's answer as it is.`,
		run: runPluginList,
	})
}

func runPluginList(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("plugin list")
	addr, token, asJSON := clientFlags(fs)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "vigil plugin list: takes no arguments, got %q\nRun 'vigil plugin list -h' for its flags.\n", pos)
		return 2
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil plugin list: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var raw json.RawMessage
	if err := c.Do(ctx, "GET", "/v1/sources", nil, &raw); err != nil {
		fmt.Fprintf(stderr, "vigil plugin list: %v\n", err)
		return 1
	}
	if *asJSON {
		printJSON(stdout, raw)
		return 0
	}
	var ans api.SourcesAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		fmt.Fprintf(stderr, "vigil plugin list: the agent's answer does not read as GET /v1/sources: %v\n", err)
		return 1
	}
	writePluginList(stdout, ans.Sources, time.Now())
	return 0
}

// writePluginList prints one line per source, and a note under the table
// for each protocol-1 plugin and each source that abstained for lack of a
// capability.
func writePluginList(w io.Writer, sources []api.SourceInfo, now time.Time) {
	if len(sources) == 0 {
		fmt.Fprintln(w, "no vote sources")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tPLUGIN\tVERSION\tPROTOCOL\tSDK\tCAPABILITIES\tPID\tRESTARTS\tUNSUPPORTED\tLAST ERROR")
	var notes []string
	for _, s := range sources {
		pid := "-"
		if s.PID > 0 {
			pid = strconv.Itoa(s.PID)
		}
		proto := "-"
		if s.Protocol > 0 {
			proto = strconv.Itoa(s.Protocol)
		}
		last := "-"
		if s.LastError != "" {
			last = ago(s.LastErrorAt, now) + ": " + oneLine(s.LastError)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", s.Name, dash(s.Plugin), dash(s.Version), proto, dash(s.SDKVersion),
			dash(strings.Join(s.Capabilities, ",")), pid, s.Restarts, s.Unsupported, last)
		if s.Protocol == 1 {
			notes = append(notes, fmt.Sprintf("source %s: its plugin speaks protocol 1, which predates capabilities: it gets no target whose health check sets ca_file, tls_server_name, insecure_skip_tls_verify, headers, follow_redirects or max_body (the source abstains on them); rebuild it with SDK %s or later", s.Name, sdk.Version))
		} else if s.Unsupported > 0 {
			notes = append(notes, fmt.Sprintf("source %s: abstained on %d targets needing a capability its plugin lacks; vigil validate names their sites", s.Name, s.Unsupported))
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, "  "+n)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table's row on one line, whatever a plugin's error says.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
