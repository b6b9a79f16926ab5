package tcpcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigilcdn/vigil/sdk"
)

// Defaults for the config attributes.
const (
	DefaultConcurrency = 32
	DefaultVoter       = "tcp"
	DefaultTimeout     = 5 * time.Second
)

// Source is the TCP-connect vote source.
type Source struct {
	log         sdk.Logger
	concurrency int
	voter       string
	port        int // 0: the port of the target's address
}

// New returns a Source with default settings; log may be nil.
func New(log sdk.Logger) *Source {
	if log == nil {
		log = nopLogger{}
	}
	return &Source{log: log, concurrency: DefaultConcurrency, voter: DefaultVoter}
}

// Info names the plugin.
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-tcp", Version: "0.1.0"}, nil
}

// ConfigSchema declares the `config { }` attributes. vigil checks their
// types and reports mistakes at file:line before Configure is called.
func (s *Source) ConfigSchema(context.Context) (sdk.Schema, error) {
	return sdk.Schema{Attributes: []sdk.Attribute{
		{Name: "port", Type: sdk.TypeNumber, Description: "Port to connect to instead of the origin address's port."},
		{Name: "concurrency", Type: sdk.TypeNumber, Description: "Connections attempted at once (default 32)."},
		{Name: "voter", Type: sdk.TypeString, Description: `Voter id of the votes (default "tcp").`},
	}}, nil
}

// Configure checks the values. Each problem names its attribute, so vigil
// shows it at the attribute's file:line.
func (s *Source) Configure(_ context.Context, cfg sdk.Config) error {
	var diags sdk.Diagnostics
	next := Source{log: s.log, concurrency: DefaultConcurrency, voter: DefaultVoter}
	if p, ok := cfg.Number("port"); ok {
		if p != math.Trunc(p) || p < 1 || p > 65535 {
			diags = append(diags, sdk.AttributeError("port", "Invalid port", fmt.Sprintf("port = %v: use a whole number from 1 to 65535.", p)))
		}
		next.port = int(p)
	}
	if c, ok := cfg.Number("concurrency"); ok {
		if c != math.Trunc(c) || c < 1 || c > 1024 {
			diags = append(diags, sdk.AttributeError("concurrency", "Invalid concurrency", fmt.Sprintf("concurrency = %v: use a whole number from 1 to 1024.", c)))
		}
		next.concurrency = int(c)
	}
	if v, ok := cfg.String("voter"); ok {
		if !sdk.ValidVoter(v) {
			diags = append(diags, sdk.AttributeError("voter", "Invalid voter id", "Use 1 to 128 letters, digits and ._:-@/."))
		}
		next.voter = v
	}
	if len(diags) > 0 {
		return diags
	}
	*s = next
	return nil
}

// Vote connects to every target, at most s.concurrency at once, and casts
// one vote per target. A target whose address cannot be parsed gets no vote:
// the source abstains on it rather than calling it down.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	votes := make([]*sdk.Vote, len(ballot.Targets))
	// A plain Group (no WithContext): one target's failure cancels no other.
	var g errgroup.Group
	g.SetLimit(s.concurrency)
	for i := range ballot.Targets {
		if ctx.Err() != nil {
			break // the round's deadline: the targets left abstain
		}
		g.Go(func() error { // waits while s.concurrency checks are in flight
			if ctx.Err() == nil {
				votes[i] = s.check(ctx, &ballot.Targets[i])
			}
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	out := make([]sdk.Vote, 0, len(votes))
	for _, v := range votes {
		if v != nil {
			out = append(out, *v)
		}
	}
	return out, nil
}

func (s *Source) check(ctx context.Context, t *sdk.Target) *sdk.Vote {
	addr, err := s.dialAddress(t.Address)
	if err != nil {
		s.log.Warn("cannot check target", "site", t.Site, "origin", t.Origin, "error", err)
		return nil
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", addr)
	v := &sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Latency: time.Since(start)}
	switch {
	case err == nil:
		conn.Close()
		v.Value, v.Reason, v.Detail = sdk.Up, sdk.ReasonOK, "connected to "+addr
	case ctx.Err() != nil:
		return nil // the round's deadline, not the origin's fault: abstain
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		v.Value, v.Reason, v.Detail = sdk.Down, sdk.ReasonTimeout, fmt.Sprintf("no connection to %s within %v", addr, timeout)
	default:
		v.Value, v.Reason, v.Detail = sdk.Down, sdk.ReasonConnectFailed, err.Error()
	}
	return v
}

// dialAddress turns "https://203.0.113.10:8443" into "203.0.113.10:8443",
// using the scheme's default port or the configured one.
func (s *Source) dialAddress(address string) (string, error) {
	u, err := url.Parse(address)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("address %q is not a URL with a host", address)
	}
	port := u.Port()
	switch {
	case s.port != 0:
		port = fmt.Sprint(s.port)
	case port != "":
	case u.Scheme == "https":
		port = "443"
	case u.Scheme == "http":
		port = "80"
	default:
		return "", fmt.Errorf("address %q has no port and an unknown scheme", address)
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// nopLogger discards everything.
type nopLogger struct{}

func (nopLogger) Trace(string, ...any) {}
func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
