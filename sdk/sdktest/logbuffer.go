package sdktest

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// LogBuffer is a log sink that goroutines (a logger, a plugin process's
// stderr) write while a test reads it. Give it as an hclog.LoggerOptions
// Output or an exec.Cmd's Stderr; the zero value is ready to use.
type LogBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // signalled after each write, for WaitFor
}

// Write appends p. It never fails.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written == nil {
		b.written = make(chan struct{}, 1)
	}
	n, err := b.buf.Write(p)
	select {
	case b.written <- struct{}{}:
	default:
	}
	return n, err
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitFor waits until one line holds every one of parts and returns that
// line. It wakes on each write rather than polling, and fails the test,
// showing the whole log, when timeout passes first.
func (b *LogBuffer) WaitFor(t testing.TB, timeout time.Duration, parts ...string) string {
	t.Helper()
	b.mu.Lock()
	if b.written == nil {
		b.written = make(chan struct{}, 1)
	}
	written := b.written
	b.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		for _, line := range strings.Split(b.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return line
			}
		}
		select {
		case <-written:
		case <-deadline.C:
			t.Fatalf("no log line with %q within %s; the log:\n%s", parts, timeout, b.String())
		}
	}
}
