package proxy

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of NewServer, as vigil-node's -proxy-listen has them.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
)

// Server serves a Proxy on listeners: a net/http.Server whose handler is
// the Proxy, with its errors (a panic in a handler, a malformed request
// net/http refused) logged to Options.Log.
type Server struct {
	http *http.Server
}

// NewServer returns a server for p. A request head must arrive within
// readHeaderTimeout once its first byte has, and a kept-alive connection is
// closed after idleTimeout without a request (zero or less takes the
// defaults).
func (p *Proxy) NewServer(readHeaderTimeout, idleTimeout time.Duration) *Server {
	if readHeaderTimeout <= 0 {
		readHeaderTimeout = DefaultReadHeaderTimeout
	}
	if idleTimeout <= 0 {
		idleTimeout = DefaultIdleTimeout
	}
	return &Server{http: &http.Server{
		Handler:           p,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          p.opts.Log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}}
}

// Serve accepts connections on ln until Close, and then returns
// http.ErrServerClosed. Any other error is the listener's.
func (s *Server) Serve(ln net.Listener) error { return s.http.Serve(ln) }

// Close closes the listeners and every connection at once, as
// net/http.Server.Close does: a request in flight sees its context end and
// makes no new attempt.
func (s *Server) Close() error { return s.http.Close() }

// Shutdown drains the server: it closes the listeners and the idle
// connections at once, then waits for the requests in flight to end and
// closes their connections as each does. It returns nil once every one has
// ended, or ctx's error when ctx ends first (Close then cuts the rest).
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }
