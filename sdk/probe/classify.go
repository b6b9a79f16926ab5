package probe

import (
	"errors"
	"io"
	"net"
	"syscall"
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

// connectDetail describes a ConnectFailed error in a few words.
func connectDetail(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return "DNS lookup of " + dnsErr.Name + " failed: " + dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return "connection reset by origin"
	case errors.Is(err, syscall.EPIPE):
		return "connection closed by origin while sending the request"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by origin before a complete response"
	}
	return shorten(err.Error())
}
