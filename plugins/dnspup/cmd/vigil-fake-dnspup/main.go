// Command vigil-fake-dnspup serves a fake dnspup Customer API v1 for the
// quickstart demo and for manual tests, so that the dnspup source runs
// without an account. Its checkpoints fetch each target from this machine,
// so a demo origin that fails shows as down from every checkpoint.
//
//	vigil-fake-dnspup -listen 127.0.0.1:8475 -nodes ams-1,fra-1,nyc-1
//	vigil-fake-dnspup -result fra-1=503 -result nyc-1=timeout
//	vigil-fake-dnspup -fail rate_limited:5          every call: 429 with Retry-After: 5
//	vigil-fake-dnspup -delay 3s                     every probe answer takes 3s (a slow API)
//
// Failures can also be scripted while it runs:
//
//	curl -d '{"code":"quota_exceeded","count":1}' http://127.0.0.1:8475/_fake/fail
//	curl -d '{"nodeId":"fra-1","status":503}'      http://127.0.0.1:8475/_fake/node
//	curl -d '{"seconds":3}'                        http://127.0.0.1:8475/_fake/delay
//	curl http://127.0.0.1:8475/_fake/stats
//
// A quickstart source block that uses it (any non-empty key and secret are
// accepted unless -key-env is given):
//
//	source "dnspup" {
//	  plugin    = "vigil-source-dnspup"
//	  min_votes = 2
//	  tally     = "carry"
//	  env       = ["DNSPUP_API_KEY", "DNSPUP_API_SECRET"]   # e.g. both set to "demo"
//	  config {
//	    api_base    = "http://127.0.0.1:8475"
//	    checkpoints = ["ams-1", "fra-1"]
//	  }
//	}
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
	"github.com/vigilcdn/vigil/plugins/dnspup/fakeapi"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if isVersionArgs(os.Args[1:]) {
		fmt.Println(versionLine())
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vigil-fake-dnspup:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8475", "address to listen on (keep it on loopback)")
	nodes := flag.String("nodes", "ams-1,fra-1,nyc-1", "comma-separated checkpoint ids")
	keyEnv := flag.String("key-env", "", "if set, accept only the API key in this env var (and the secret in -secret-env); otherwise any non-empty key and secret")
	secretEnv := flag.String("secret-env", "", "env var holding the only accepted API secret (with -key-env)")
	probeTimeout := flag.Duration("probe-timeout", 3*time.Second, "timeout of one pretend checkpoint probe")
	fail := flag.String("fail", "", "answer every API call with this error code, optionally :RETRY_AFTER_SECONDS (e.g. rate_limited:5 for a 429 with Retry-After, service_unavailable for a 503, internal_error for a 500)")
	pageSize := flag.Int("page-size", 0, "split GET /v1/nodes into pages of this many nodes, with a next_cursor (0: one page)")
	asyncPolls := flag.Int("async-polls", 0, "answer probe requests 202 Accepted with an id; the result is ready at the Nth GET /v1/probes/{id} (-1: never; 0: answer at once)")
	delay := flag.Duration("delay", 0, "every probe answer takes this long, as a slow API would (0: at once)")
	var results multi
	flag.Var(&results, "result", "NODE=STATUS or NODE=ERROR_TEXT: what a checkpoint always reports (repeatable)")
	flag.Parse()

	opts := fakeapi.Options{Probe: fakeapi.FetchProbe(*probeTimeout)}
	for _, id := range strings.Split(*nodes, ",") {
		if id = strings.TrimSpace(id); id != "" {
			opts.Nodes = append(opts.Nodes, customerapi.Node{ID: id, Name: id, Online: true})
		}
	}
	if len(opts.Nodes) == 0 {
		return errors.New("-nodes: give at least one node id")
	}
	if *keyEnv != "" {
		opts.Key, opts.Secret = os.Getenv(*keyEnv), os.Getenv(*secretEnv)
		if opts.Key == "" || opts.Secret == "" {
			return fmt.Errorf("-key-env %s / -secret-env %s: both variables must be set", *keyEnv, *secretEnv)
		}
	}
	if *delay < 0 {
		return fmt.Errorf("-delay %s: want a duration >= 0", *delay)
	}
	if *pageSize < 0 {
		return fmt.Errorf("-page-size %d: want 0 (one page) or more", *pageSize)
	}
	if *asyncPolls < -1 {
		return fmt.Errorf("-async-polls %d: want -1 (never ready), 0 (answer at once) or a number of polls", *asyncPolls)
	}
	opts.PageSize, opts.AsyncPolls = *pageSize, *asyncPolls
	srv := fakeapi.New(opts)
	srv.SetDelay(*delay)
	for _, r := range results {
		node, val, ok := strings.Cut(r, "=")
		if !ok || node == "" || val == "" {
			return fmt.Errorf("-result %q: want NODE=STATUS or NODE=ERROR_TEXT", r)
		}
		if n, err := strconv.Atoi(val); err == nil {
			srv.SetResult(node, &fakeapi.Result{Status: n, LatencyMs: 1})
		} else {
			srv.SetResult(node, &fakeapi.Result{Error: val})
		}
	}
	if *fail != "" {
		code, ra, _ := strings.Cut(*fail, ":")
		var wait time.Duration
		if ra != "" {
			secs, err := strconv.Atoi(ra)
			if err != nil || secs < 0 {
				return fmt.Errorf("-fail %q: retry-after must be whole seconds", *fail)
			}
			wait = time.Duration(secs) * time.Second
		}
		srv.FailNext(code, wait, 0)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "vigil-fake-dnspup: serving a fake dnspup API on http://%s (nodes %s)\n", ln.Addr(), *nodes)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
