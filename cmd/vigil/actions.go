package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/vigilcdn/vigil/api"
)

func init() {
	register(command{
		name: "switch", synopsis: "switch a site to a level by hand (holds automatic failback unless it is the top level)",
		usage: "vigil switch [-ramp] SITE LEVEL [flags]",
		help: `A switch to a level other than the top level holds the site there: failback
is manual until a switch to the top level releases the hold. A switch to the
current level changes nothing else: below the top level it sets the hold, on
the top level it releases it.`,
		run: runSwitch,
	})
	subcommandGroup("origin", "take an origin out of service, or put it back")
	register(command{
		name: "origin disable", synopsis: "take an origin out of votes, level health and the publication",
		usage: "vigil origin disable [-force] SITE ORIGIN [flags]",
		help: `The last enabled origin of the site's current level is refused: the site
would serve nothing until a round fails it over (or, with fewer than two
enabled origins left, until someone moves it, as its health checks pause).
Move the site first (vigil switch SITE LEVEL), or give -force.`,
		run: func(args []string, stdout, stderr io.Writer) int { return runOrigin("disable", args, stdout, stderr) },
	})
	register(command{
		name: "origin enable", synopsis: "put a disabled origin back (unknown until its next rounds)",
		usage: "vigil origin enable SITE ORIGIN [flags]",
		run:   func(args []string, stdout, stderr io.Writer) int { return runOrigin("enable", args, stdout, stderr) },
	})
}

// printAction prints an action's events; none is printed when there are
// none (the action changed nothing the journal records).
func printAction(stdout io.Writer, a *api.ActionResult, asJSON bool, none func() string) {
	if asJSON {
		b, _ := json.MarshalIndent(a, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return
	}
	if len(a.Events) == 0 {
		fmt.Fprintln(stdout, none())
		return
	}
	for _, e := range a.Events {
		fmt.Fprintf(stdout, "%s: %s\n", a.Site, e)
	}
}

func runSwitch(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("switch")
	addr, token, asJSON := clientFlags(fs)
	ramp := fs.Bool("ramp", false, "ramp the way back to a higher level, as an automatic failback does (the site needs health_check { ramp })")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "usage: vigil switch SITE LEVEL   (for example: vigil switch www 2)")
		return 2
	}
	site := pos[0]
	level, err := strconv.Atoi(pos[1])
	if err != nil {
		fmt.Fprintf(stderr, "vigil switch: LEVEL must be a number, got %q\n", pos[1])
		return 2
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil switch: %v\n", err)
		return 2
	}
	ctx := context.Background()
	switchTo := c.Switch
	if *ramp {
		switchTo = c.SwitchRamped
	}
	a, err := switchTo(ctx, site, level)
	if err != nil {
		fmt.Fprintf(stderr, "vigil switch: %v\n", err)
		return 1
	}
	printAction(stdout, a, *asJSON, func() string {
		// No switch: the site was on that level already. What changed is
		// the hold, which the site's view tells.
		v, err := c.Site(ctx, site)
		if err != nil {
			return fmt.Sprintf("%s: already on level %d", site, level)
		}
		if v.ManualHold {
			return fmt.Sprintf("%s: already on level %d; it is now held there: failback is manual until vigil switch %s %d", site, level, site, v.TopLevel())
		}
		return fmt.Sprintf("%s: already on level %d, the top level; no manual hold: failback is %s, as configured", site, level, v.Failback)
	})
	return 0
}

func runOrigin(verb string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("origin " + verb)
	addr, token, asJSON := clientFlags(fs)
	force := new(bool)
	if verb == "disable" {
		force = fs.Bool("force", false, "disable it even when it is the last enabled origin of the site's current level")
	}
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		fmt.Fprintf(stderr, "usage: vigil origin %s SITE ORIGIN   (for example: vigil origin %s www a1)\n", verb, verb)
		return 2
	}
	site, origin := pos[0], pos[1]
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil origin %s: %v\n", verb, err)
		return 2
	}
	ctx := context.Background()
	var a *api.ActionResult
	if verb == "disable" {
		a, err = c.Disable(ctx, site, origin, *force)
	} else {
		a, err = c.Enable(ctx, site, origin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "vigil origin %s: %v\n", verb, err)
		return 1
	}
	printAction(stdout, a, *asJSON, func() string { return fmt.Sprintf("%s/%s: already %sd", site, origin, verb) })
	return 0
}
