package testnet

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// below is the start of the kernel's ephemeral range when it cannot be
// read (Linux's default).
const defaultEphemeralLow = 32768

// span is how many ports below the ephemeral range Addr uses.
const span = 12000

var next atomic.Uint32

// Addr returns "127.0.0.1:PORT" with PORT free for both TCP and UDP and
// reserved for t until it ends (see the package doc).
func Addr(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	first := low - span
	if first < 1024 {
		first = 1024
	}
	n := low - first
	dir := filepath.Join(os.TempDir(), "vigil-testnet")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("testnet: %v", err)
	}
	// Start at a place that differs between processes, then walk.
	start := (os.Getpid()*7919 + int(next.Add(1))*131) % n
	for i := 0; i < n; i++ {
		port := first + (start+i)%n
		lock, ok := lockPort(dir, port)
		if !ok {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if !bindable(addr) {
			lock.Close()
			continue
		}
		t.Cleanup(func() { lock.Close() })
		return addr
	}
	t.Fatalf("testnet: no loopback port free in %d-%d", first, low-1)
	return ""
}

// lockPort takes the port's lock file, without waiting.
func lockPort(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.lock", port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// bindable reports whether addr can be bound for TCP and for UDP now.
func bindable(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLow
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return defaultEphemeralLow
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 1024 {
		return defaultEphemeralLow
	}
	return low
}
