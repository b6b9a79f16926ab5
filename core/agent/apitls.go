package agent

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"github.com/vigilcdn/vigil/core/config"
)

// apiTLS holds what the API's listener serves: https with the certificate
// and client CAs of control { api { tls } }, or plain http without it. A
// reload (SIGHUP) reads the files again, and may turn https on or off on
// the same listener: a new connection gets what is in force when it is
// accepted, connections already open keep theirs. A reload whose files do
// not load is refused and keeps the old ones.
type apiTLS struct {
	mu  sync.RWMutex
	cur *tls.Config // nil: plain http
}

// set loads c's files and puts them in force (c nil: plain http).
func (h *apiTLS) set(c *config.APITLS) error {
	if c == nil {
		h.mu.Lock()
		h.cur = nil
		h.mu.Unlock()
		return nil
	}
	cert, err := config.LoadKeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return fmt.Errorf("control { api { tls } }: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	if c.ClientCAFile != "" {
		pool, err := config.LoadCAPool(c.ClientCAFile)
		if err != nil {
			return fmt.Errorf("control { api { tls { client_ca_file } } }: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	h.mu.Lock()
	h.cur = cfg
	h.mu.Unlock()
	return nil
}

// put puts cfg back in force (a reload that failed after set).
func (h *apiTLS) put(cfg *tls.Config) {
	h.mu.Lock()
	h.cur = cfg
	h.mu.Unlock()
}

func (h *apiTLS) current() *tls.Config {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.cur
}

// scheme is the API's URL scheme now.
func (h *apiTLS) scheme() string {
	if h.current() == nil {
		return "http"
	}
	return "https"
}

// listener serves ln through h.
func (h *apiTLS) listener(ln net.Listener) net.Listener { return &apiListener{Listener: ln, tls: h} }

// apiListener hands each accepted connection to TLS while the API serves
// https; net/http then runs the handshake (with its own deadlines) and
// sets Request.TLS.
type apiListener struct {
	net.Listener
	tls *apiTLS
}

func (l *apiListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if cfg := l.tls.current(); cfg != nil {
		return tls.Server(c, cfg), nil
	}
	return c, nil
}
