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
		log = sdk.NopLogger()
	}
	return &Source{log: log, concurrency: DefaultConcurrency, voter: DefaultVoter}
}

// Info names the plugin and declares the one capability it honours: it
// answers what it cannot judge with an Abstain vote and a reason. It
// declares none of the TLS or HTTP settings (it opens a TCP connection,
// nothing more), so vigil hands it no target that sets them and abstains
// for it there.
func (s *Source) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-tcp", Version: "0.2.0", Capabilities: []string{sdk.CapabilityAbstain}}, nil
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
// one vote per target: Down when the connection is refused or times out,
// Abstain otherwise. This is a narrow check: an open port says nothing of
// the HTTP answer vigil's health check asks for (an origin answering 503
// accepts connections), so the source never votes Up; it leaves what it
// did not check to the sources after it. A target whose address cannot be
// parsed, or that the round's deadline left unchecked, gets an Abstain
// with its reason too.
func (s *Source) Vote(ctx context.Context, ballot sdk.Ballot) ([]sdk.Vote, error) {
	ctx, cancel := sdk.SoftDeadline(ctx) // leave time to send the votes back
	defer cancel()
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
	for i, v := range votes {
		if v == nil { // not reached before the deadline
			v = s.abstain(&ballot.Targets[i], sdk.ReasonOutOfTime, "the round's deadline came before the check")
		}
		out = append(out, *v)
	}
	return out, nil
}

// abstain is the source's Abstain vote on t.
func (s *Source) abstain(t *sdk.Target, reason sdk.Reason, detail string) *sdk.Vote {
	return &sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: s.voter, Value: sdk.Abstain, Reason: reason, Detail: detail}
}

func (s *Source) check(ctx context.Context, t *sdk.Target) *sdk.Vote {
	addr, err := s.dialAddress(t.Address)
	if err != nil {
		s.log.Warn("cannot check target", "site", t.Site, "origin", t.Origin, "error", err)
		return s.abstain(t, sdk.ReasonUnsupported, err.Error())
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
		// Open, but the HTTP answer is unchecked: no Up from this source.
		conn.Close()
		v.Value, v.Reason, v.Detail = sdk.Abstain, sdk.ReasonUnsupported, "connected to "+addr+": the port is open; whether the origin answers well is for the next source"
	case ctx.Err() != nil:
		return s.abstain(t, sdk.ReasonOutOfTime, "the round's deadline came during the connection") // not the origin's fault
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
