package edge_test

import (
	"io"
	"net"
	"os"
	"testing"

	"github.com/vigilcdn/vigil/internal/benchproc"
)

// The floor of BenchmarkEdgeWrk: a TCP relay that does none of a proxy's
// work (no HTTP, an origin connection of its own per visitor connection),
// to tell what a Go process's scheduling costs from what vigil-node's proxy
// does: go-forwarder, the usual Go design, a goroutine copying each way.

// startFloor runs the floor test (TestGoForwarderProcess) in a process of
// its own, relaying to origin.
func startFloor(b *testing.B, test, origin string) (string, int) {
	return benchproc.Start(b, test, benchproc.Options{
		Env:  []string{"VIGIL_FLOOR_ORIGIN=" + origin},
		Wrap: func(bin string, args []string) (string, []string) { return pinned(bin, args...) },
	})
}

// floorListen is a floor process's listener, or a skip when it runs alone.
func floorListen(t *testing.T) (net.Listener, string) {
	origin := os.Getenv("VIGIL_FLOOR_ORIGIN")
	if origin == "" {
		t.Skip("a floor process of BenchmarkEdgeWrk, which starts it")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, origin
}

// TestGoForwarderProcess is the go-forwarder floor.
func TestGoForwarderProcess(t *testing.T) {
	ln, origin := floorListen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", origin)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	benchproc.Announce(ln.Addr().String())
	_ = ln.Close()
}
