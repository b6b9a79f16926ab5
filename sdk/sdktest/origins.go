package sdktest

import (
	"net"
	"sync"
	"testing"
)

// BlackHole starts an origin on loopback that accepts connections and
// never answers, as a data centre that drops packets after the handshake
// does, and returns its address ("http://127.0.0.1:PORT"). Use it to test
// that a source gives such origins a verdict (a timeout) within its
// deadline. The connections stay open until the test ends.
func BlackHole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sdktest: black hole: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}
