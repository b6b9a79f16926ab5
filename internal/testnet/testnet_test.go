package testnet

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestAddrIsReservedAndOutsideTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("Addr gave %s twice to one test", addr)
		}
		seen[addr] = true
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port >= ephemeralLow() {
			t.Errorf("port %d is inside the ephemeral range (from %d)", port, ephemeralLow())
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the address Addr gave cannot be bound: %v", err)
		}
		ln.Close()
	}
}

// TestAnotherProcessSkipsAReservedPort: a port reserved here is not given
// to another test process while this test holds it.
func TestAnotherProcessSkipsAReservedPort(t *testing.T) {
	if os.Getenv("TESTNET_CHILD") != "" {
		var out []string
		for range 200 {
			out = append(out, Addr(t))
		}
		os.Stdout.WriteString(strings.Join(out, "\n"))
		return
	}
	mine := map[string]bool{}
	for range 200 {
		mine[Addr(t)] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAnotherProcessSkipsAReservedPort$")
	cmd.Env = append(os.Environ(), "TESTNET_CHILD=1")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mine[strings.TrimSpace(line)] {
			t.Fatalf("the child was given %s, which this process holds", line)
		}
	}
}
