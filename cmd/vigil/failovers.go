package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func init() {
	register(command{
		name: "failovers", synopsis: "print a site's failovers, each with the time it took from the first failed verdict to the edges",
		usage: "vigil failovers [-n N] [-json] SITE",
		run:   runFailovers,
	})
}

func runFailovers(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("failovers")
	addr, token, asJSON := clientFlags(fs)
	n := fs.Int("n", 10, "print the last `N` failovers (1 to 100)")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vigil failovers: give one site: vigil failovers SITE (vigil status lists the sites)")
		return 2
	}
	if *n < 1 || *n > 100 {
		fmt.Fprintf(stderr, "vigil failovers: -n %d: give a count from 1 to 100\n", *n)
		return 2
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil failovers: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	list, err := c.Failovers(ctx, pos[0], *n)
	if err != nil {
		fmt.Fprintf(stderr, "vigil failovers: %v\n", err)
		return 1
	}
	if *asJSON {
		b, err := json.Marshal(list)
		if err != nil {
			fmt.Fprintf(stderr, "vigil failovers: %v\n", err)
			return 1
		}
		printJSON(stdout, b)
		return 0
	}
	writeFailoverReports(stdout, list)
	return 0
}
