package preflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/core/publish/dns"
)

// parseListen checks addr as net.Listen reads it, without binding: a host
// and a port, the port a number from 0 to 65535 or a service name.
func parseListen(network, addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err = net.LookupPort(network, p)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// inUse reports whether a bind failed because the address is taken.
func inUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

func badListen(what, addr, example string, err error, at hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid listen address",
		Detail: fmt.Sprintf("%s = %q: %v: the agent would refuse to start. Write host:port with a port from 0 to 65535, such as %q.",
			what, addr, err, example),
		Subject: ptr(at),
	}
}

// listenInUse is the warning for an address some process holds: most
// likely the agent this configuration belongs to, running on this
// machine, which a check cannot tell from another program.
func listenInUse(what, addr string, err error, at hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  "Listen address in use",
		Detail: fmt.Sprintf("%s = %q is taken on this machine (%v). That is expected while an agent with this configuration runs here; otherwise an agent could not start until what holds it lets go: stop it, or listen on another address.",
			what, addr, err),
		Subject: ptr(at),
	}
}

const apiWhat = "control { api { listen } }"

// checkAPI checks the API's listen address; online it binds it and lets go
// at once, as the agent's listen would bind it.
func checkAPI(cfg *config.Config, loc *locator, offline bool) hcl.Diagnostics {
	addr := cfg.Control.API.Listen
	at := func() hcl.Range { return loc.controlAttr("api", "listen") }
	if _, _, err := parseListen("tcp", addr); err != nil {
		return hcl.Diagnostics{badListen(apiWhat, addr, config.DefaultAPIListen, err, at())}
	}
	if offline {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	switch {
	case err == nil:
		_ = ln.Close()
		return nil
	case inUse(err):
		return hcl.Diagnostics{listenInUse(apiWhat, addr, err, at())}
	default:
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot listen on the API address",
			Detail: fmt.Sprintf("%s = %q: %v: the agent would refuse to start. Listen on an address of this machine that vigil may bind, such as %q.",
				apiWhat, addr, err, config.DefaultAPIListen),
			Subject: ptr(at()),
		}}
	}
}

const dnsWhat = "publish \"dns\" { listen }"

// checkDNS builds the DNS publisher with the agent's own constructor;
// online it starts it, binding UDP and TCP, and closes it at once.
func checkDNS(ctx context.Context, cfg *config.Config, loc *locator, offline bool, log hclog.Logger) hcl.Diagnostics {
	d := cfg.DNS
	if d == nil {
		return nil
	}
	listenAt := func() hcl.Range { return or(loc.attr(d.DeclRange, "listen"), d.DeclRange) }
	if _, _, err := parseListen("udp", d.Listen); err != nil {
		return hcl.Diagnostics{badListen(dnsWhat, d.Listen, "127.0.0.1:5353", err, listenAt())}
	}
	srv, err := dns.New(d, publish.NewHub(), log.Named("dns"))
	if err != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid DNS publisher",
			Detail:   fmt.Sprintf("%v: the agent would refuse to start.", err),
			Subject:  d.DeclRange.Ptr(),
		}}
	}
	if offline {
		return nil
	}
	err = srv.Start(ctx)
	_ = srv.Close()
	switch {
	case err == nil:
		return nil
	case inUse(err):
		return hcl.Diagnostics{listenInUse(dnsWhat, d.Listen, err, listenAt())}
	default:
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot start the DNS publisher",
			Detail: fmt.Sprintf("%v: the agent would refuse to start. Listen on an address of this machine that vigil may bind (UDP and TCP), such as \"127.0.0.1:5353\".",
				err),
			Subject: ptr(listenAt()),
		}}
	}
}

// checkCollision reports an API and a DNS publisher on one TCP port: the
// agent starts the publisher first, then cannot listen for the API. Each
// bound alone, a bind check would pass both.
func checkCollision(cfg *config.Config, loc *locator) hcl.Diagnostics {
	if cfg.DNS == nil {
		return nil
	}
	apiHost, apiPort, err1 := parseListen("tcp", cfg.Control.API.Listen)
	dnsHost, dnsPort, err2 := parseListen("tcp", cfg.DNS.Listen)
	if err1 != nil || err2 != nil || apiPort == 0 || apiPort != dnsPort || !overlap(apiHost, dnsHost) {
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Listen addresses collide",
		Detail: fmt.Sprintf("%s = %q and %s = %q take the same TCP port: the agent starts the DNS publisher first, and then cannot listen for the API. Give one of them another port.",
			apiWhat, cfg.Control.API.Listen, dnsWhat, cfg.DNS.Listen),
		Subject: ptr(loc.controlAttr("api", "listen")),
	}}
}

// overlap reports whether binding two hosts on one port conflicts: the
// same host, or a wildcard on either side.
func overlap(a, b string) bool {
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return a == b || wild(a) || wild(b)
}
