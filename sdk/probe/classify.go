package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// isConnError reports whether err is a network-level failure (reset, broken
// pipe, unreachable) rather than a TLS one, for errors met during the TLS
// handshake.
func isConnError(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// failed turns an error met in the phase under way into a down result, or
// into an error when the caller's context ended first. status and bodyBytes
// are those of the response whose body was being read, if any.
func (p *prober) failed(err error, status int, bodyBytes int64) (Result, error) {
	phase := p.currentPhase()
	res := Result{Phase: phase, Status: status, Proto: p.proto, Latency: time.Since(p.start), BodyBytes: bodyBytes}
	if p.ctx.Err() == nil && isDeadline(err) {
		// A socket deadline set from a context can fire a hair before the
		// context itself ends: wait for it, so that the caller's deadline
		// is never read as the origin's timeout (a false down). When the
		// context's deadline is (all but) reached, its end is certain and
		// only late on a loaded machine: wait for it however long.
		if dl, ok := p.ctx.Deadline(); ok && time.Until(dl) < 50*time.Millisecond {
			<-p.ctx.Done()
		} else {
			select {
			case <-p.ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if p.ctx.Err() != nil {
		cause := context.Cause(p.ctx)
		if cause != errTimedOut {
			return Result{}, fmt.Errorf("probe interrupted: %w", cause)
		}
		res.Reason, res.Detail = Timeout, timeoutDetail(phase, bodyBytes, p.t.timeout)
		return res, nil
	}
	var te *tlsError
	if errors.As(err, &te) {
		res.Reason, res.Detail = TLSFailed, shorten(te.err.Error())
		return res, nil
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		res.Phase = PhaseDNS
	}
	res.Reason, res.Detail = ConnectFailed, connectDetail(err, res.Phase, bodyBytes)
	return res, nil
}

// timeoutDetail says which stage the timeout cut short.
func timeoutDetail(phase Phase, bodyBytes int64, timeout time.Duration) string {
	var what string
	switch phase {
	case PhaseDNS:
		what = "during the DNS lookup"
	case PhaseConnect:
		what = "while connecting"
	case PhaseTLS:
		what = "during the TLS handshake"
	case PhaseHeaders:
		what = "waiting for the response headers"
	case PhaseBody:
		what = "reading the body after " + sizeString(bodyBytes)
	default:
		what = "before a response"
	}
	return "timeout " + what + " (" + timeout.String() + ")"
}

// connectDetail describes a ConnectFailed error in a few words.
func connectDetail(err error, phase Phase, bodyBytes int64) string {
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return "DNS lookup of " + dnsErr.Name + " failed: " + dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return "connection reset by origin" + inPhase(phase, bodyBytes)
	case errors.Is(err, syscall.EPIPE):
		return "connection closed by origin while sending the request"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if phase == PhaseBody {
			return "connection closed by origin before the end of the body, after " + sizeString(bodyBytes)
		}
		return "connection closed by origin before a complete response"
	}
	return shorten(err.Error()) + inPhase(phase, bodyBytes)
}

func inPhase(phase Phase, bodyBytes int64) string {
	if phase == PhaseBody {
		return " while reading the body, after " + sizeString(bodyBytes)
	}
	return ""
}

// isDeadline reports whether err is a deadline passing (of a socket or a
// context), not a failure of the origin.
func isDeadline(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
