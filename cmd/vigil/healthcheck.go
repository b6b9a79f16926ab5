package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

func init() {
	register(command{
		name: "healthcheck", synopsis: "exit 0 when the agent's /healthz answers ok (a container's HEALTHCHECK)",
		usage: "vigil healthcheck [-address URL] [-timeout D]",
		help: `For images without curl (the vigil image is FROM scratch): GET /healthz on
the agent's API, exit 0 when it answers 200 "ok", 1 otherwise, with the reason
on standard error.`,
		run: runHealthcheck,
	})
}

func runHealthcheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("healthcheck")
	addr, token, _ := clientFlags(fs)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "vigil healthcheck: unexpected argument %q: give the agent with -address %s\n", pos[0], pos[0])
		return 2
	}
	c, err := newClient(fs, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "vigil healthcheck: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var body json.RawMessage
	if err := c.Do(ctx, http.MethodGet, "/healthz", nil, &body); err != nil {
		fmt.Fprintf(stderr, "vigil healthcheck: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, strings.TrimSpace(string(body)))
	return 0
}
