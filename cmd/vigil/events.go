package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/vigilcdn/vigil/api"
)

func init() {
	register(command{
		name: "events", synopsis: "print the event journal; -follow waits for new events",
		usage: "vigil events [-site SITE] [-after SEQ] [-n N] [-follow] [-json]",
		run:   runEvents,
	})
}

func runEvents(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("events")
	addr, token, asJSON := clientFlags(fs)
	follow := fs.Bool("follow", false, "keep waiting for new events")
	site := fs.String("site", "", "only this site's events")
	after := fs.Uint64("after", 0, "only events after this sequence number")
	last := fs.Int("n", 0, "only the last `N` events (with -follow: then the new ones); 0 prints all")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "vigil events: unexpected argument %q: one site's events are -site %s\n", pos[0], pos[0])
		return 2
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil events: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *last < 0 {
		fmt.Fprintf(stderr, "vigil events: -n %d: give a count of 1 or more (or 0 for all)\n", *last)
		return 2
	}
	cursor := *after
	if *last > 0 {
		// The journal is read from the start: find where its last N
		// events begin, then print from there.
		start, err := lastEventsStart(ctx, c, *site, cursor, *last)
		if err != nil {
			fmt.Fprintf(stderr, "vigil events: %v\n", err)
			return 1
		}
		cursor = start
	}
	for {
		q := api.EventsQuery{After: cursor, Site: *site, Limit: 1000}
		if *follow {
			q.Wait = 30 * time.Second
		}
		events, err := c.Events(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "vigil events: %v\n", err)
			if !*follow {
				return 1
			}
			select {
			case <-ctx.Done():
				return 0
			case <-time.After(2 * time.Second):
			}
			continue
		}
		for _, e := range events {
			cursor = e.Seq
			if *asJSON {
				b, err := json.Marshal(e)
				if err != nil {
					fmt.Fprintf(stderr, "vigil events: %v\n", err)
					return 1
				}
				fmt.Fprintln(stdout, string(b))
				continue
			}
			who := ""
			if e.Actor != "" {
				who = " by " + e.Actor
			}
			fmt.Fprintf(stdout, "%6d  %s  %-10s %s%s\n", e.Seq, e.Time.Local().Format("2006-01-02 15:04:05"), e.Site, e.Event, who)
		}
		if !*follow && len(events) < 1000 {
			return 0
		}
	}
}

// lastEventsStart is the cursor after which the last n events (of site,
// after after) begin. The journal pages forward only, so it reads it
// through, keeping the cursor before each of the last n events it saw.
func lastEventsStart(ctx context.Context, c *api.Client, site string, after uint64, n int) (uint64, error) {
	const page = 10000 // the API's largest
	before := make([]uint64, 0, n+1)
	cursor := after
	for {
		events, err := c.Events(ctx, api.EventsQuery{After: cursor, Site: site, Limit: page})
		if err != nil {
			return 0, err
		}
		for _, e := range events {
			before = append(before, cursor)
			if len(before) > n {
				before = before[1:]
			}
			cursor = e.Seq
		}
		if len(events) < page {
			break
		}
	}
	if len(before) == 0 {
		return after, nil
	}
	return before[0], nil
}
