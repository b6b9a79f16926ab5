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
		usage: "vigil events [-site SITE] [-after SEQ] [-follow] [-json]",
		run:   runEvents,
	})
}

func runEvents(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("events")
	addr, token, asJSON := clientFlags(fs)
	follow := fs.Bool("follow", false, "keep waiting for new events")
	site := fs.String("site", "", "only this site's events")
	after := fs.Uint64("after", 0, "only events after this sequence number")
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
	cursor := *after
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
