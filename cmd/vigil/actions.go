package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/vigilcdn/vigil/core/decide"
)

func init() {
	register("switch", "switch a site to a level by hand (holds automatic failback unless it is the top level)", runSwitch)
	register("origin", "disable or enable an origin: vigil origin disable|enable SITE ORIGIN", runOrigin)
}

type actionAnswer struct {
	Site   string         `json:"site"`
	Events []decide.Event `json:"events"`
}

func printAction(stdout io.Writer, raw json.RawMessage, asJSON bool, none string) {
	if asJSON {
		printJSON(stdout, raw)
		return
	}
	var a actionAnswer
	_ = json.Unmarshal(raw, &a)
	if len(a.Events) == 0 {
		fmt.Fprintln(stdout, none)
		return
	}
	for _, e := range a.Events {
		fmt.Fprintf(stdout, "%s: %s\n", a.Site, e)
	}
}

func runSwitch(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr, token, asJSON := clientFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "usage: vigil switch SITE LEVEL   (for example: vigil switch www 2)")
		return 2
	}
	level, err := strconv.Atoi(pos[1])
	if err != nil {
		fmt.Fprintf(stderr, "vigil switch: LEVEL must be a number, got %q\n", pos[1])
		return 2
	}
	var raw json.RawMessage
	if err := newClient(*addr, *token).do(context.Background(), "POST", "/v1/sites/"+pos[0]+"/switch", map[string]int{"level": level}, &raw); err != nil {
		fmt.Fprintf(stderr, "vigil switch: %v\n", err)
		return 1
	}
	printAction(stdout, raw, *asJSON, fmt.Sprintf("%s: already on level %d; it is now pinned there", pos[0], level))
	return 0
}

func runOrigin(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("origin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr, token, asJSON := clientFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 3 || (pos[0] != "disable" && pos[0] != "enable") {
		fmt.Fprintln(stderr, "usage: vigil origin disable|enable SITE ORIGIN")
		return 2
	}
	verb, site, origin := pos[0], pos[1], pos[2]
	var raw json.RawMessage
	if err := newClient(*addr, *token).do(context.Background(), "POST", "/v1/sites/"+site+"/origins/"+origin+"/"+verb, struct{}{}, &raw); err != nil {
		fmt.Fprintf(stderr, "vigil origin %s: %v\n", verb, err)
		return 1
	}
	printAction(stdout, raw, *asJSON, fmt.Sprintf("%s/%s: already %sd", site, origin, verb))
	return 0
}
