package pluginhost

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/sdk"
)

// Bounds on what a plugin can make the host store or print.
const (
	// MaxLogLinesPerSecond is how many log lines of one plugin process
	// (its hclog lines, plain stderr and stdout) the host re-emits in a
	// second; the rest are dropped and counted in [Stats].DroppedLogLines,
	// and the next line logged says how many were.
	MaxLogLinesPerSecond = 200
	// MaxDetailBytes is the longest vote Detail the host keeps (after the
	// plugin reason is put before it); a longer one is cut at a UTF-8
	// boundary, marked, and counted in [Stats].TruncatedDetails.
	MaxDetailBytes = 2048
)

// lineLimiter lets through at most MaxLogLinesPerSecond lines a second
// (a fixed one-second window) and counts the others.
type lineLimiter struct {
	mu      sync.Mutex
	window  time.Time
	n       int
	dropped int // in the windows since the last line let through
	total   *atomic.Uint64
	now     func() time.Time
}

// allow reports whether a line may be logged, and how many were dropped
// since the last one that was.
func (l *lineLimiter) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= MaxLogLinesPerSecond {
		l.dropped++
		l.total.Add(1)
		return false, 0
	}
	l.n++
	d := l.dropped
	l.dropped = 0
	return true, d
}

// pluginLog is the logger go-plugin writes a plugin's stderr lines
// through (the one exitLogger.Named returns): every line is rate-limited,
// and a plain line, which go-plugin logs at DEBUG with no key/value pairs,
// is logged at INFO, as the plugin's own output that it is (a Go
// plugin's log package, a Python plugin's print to stderr).
type pluginLog struct {
	hclog.Logger
	lim *lineLimiter
}

func (l *pluginLog) pass() bool {
	ok, dropped := l.lim.allow()
	if ok && dropped > 0 {
		l.Logger.Warn(fmt.Sprintf("dropped %d log lines of the plugin: over %d a second", dropped, MaxLogLinesPerSecond))
	}
	return ok
}

func (l *pluginLog) Trace(msg string, args ...any) {
	if l.pass() {
		l.Logger.Trace(msg, args...)
	}
}

func (l *pluginLog) Debug(msg string, args ...any) {
	if !l.pass() {
		return
	}
	if len(args) == 0 { // a plain stderr line (an hclog line has a timestamp)
		l.Logger.Info(msg, "stream", "stderr")
		return
	}
	l.Logger.Debug(msg, args...)
}

func (l *pluginLog) Info(msg string, args ...any) {
	if l.pass() {
		l.Logger.Info(msg, args...)
	}
}

func (l *pluginLog) Warn(msg string, args ...any) {
	if l.pass() {
		l.Logger.Warn(msg, args...)
	}
}

func (l *pluginLog) Error(msg string, args ...any) {
	if l.pass() {
		l.Logger.Error(msg, args...)
	}
}

// Named is go-plugin's way to the logger of the plugin's stderr.
func (l *pluginLog) Named(name string) hclog.Logger {
	return &pluginLog{Logger: l.Logger.Named(name), lim: l.lim}
}

// lineWriter logs each line written to it at INFO, tagged with stream:
// go-plugin's SyncStdout and SyncStderr, what a Go plugin writes to
// os.Stdout and os.Stderr once served. A line longer than 64 KiB is
// logged in pieces.
type lineWriter struct {
	log    *pluginLog
	stream string
	mu     sync.Mutex
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= 64<<10 {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	if w.log.pass() {
		w.log.Logger.Info(string(line), "stream", w.stream)
	}
}

// capDetail cuts v's Detail to MaxDetailBytes and reports whether it did.
func capDetail(v *sdk.Vote) bool {
	if len(v.Detail) <= MaxDetailBytes {
		return false
	}
	cut := MaxDetailBytes
	for cut > 0 && !utf8.RuneStart(v.Detail[cut]) {
		cut--
	}
	v.Detail = fmt.Sprintf("%s… (%d bytes cut: vigil keeps %d)", v.Detail[:cut], len(v.Detail)-cut, MaxDetailBytes)
	return true
}
