package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/vigilcdn/vigil/api"
)

func init() {
	register(command{
		name: "reload", synopsis: "make the agent read its configuration again, as SIGHUP does",
		usage: "vigil reload [flags]",
		help: `The agent reads its configuration file (or folder) again and applies it
(POST /v1/reload, with the operator's token). It answers what it applied,
what needs a restart, or why it refused: an invalid configuration is
refused with its diagnostics, and the old one stays in force. Exit codes:
0 reloaded, 1 refused or reloaded in part.`,
		run: runReload,
	})
}

func runReload(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("reload")
	addr, token, asJSON := clientFlags(fs)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "vigil reload: unexpected argument %q: the agent reloads the configuration it was started with\n", pos[0])
		return 2
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil reload: %v\n", err)
		return 2
	}
	ans, err := c.Reload(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "vigil reload: %v\n", err)
		return 1
	}
	printReload(stdout, ans, *asJSON)
	if !ans.Reloaded {
		return 1
	}
	return 0
}

func printReload(w io.Writer, a *api.ReloadAnswer, asJSON bool) {
	if asJSON {
		b, _ := json.MarshalIndent(a, "", "  ")
		fmt.Fprintln(w, string(b))
		return
	}
	switch {
	case len(a.Failed) > 0:
		fmt.Fprintln(w, "reloaded in part: what failed keeps its old settings")
	case len(a.NeedRestart) > 0:
		fmt.Fprintln(w, "reloaded, except settings that need a restart")
	default:
		fmt.Fprintln(w, "reloaded")
	}
	for _, s := range a.Applied {
		fmt.Fprintf(w, "  applied: %s\n", s)
	}
	for _, s := range a.NeedRestart {
		fmt.Fprintf(w, "  needs a restart: %s\n", s)
	}
	for _, s := range a.Failed {
		fmt.Fprintf(w, "  failed: %s\n", s)
	}
}
