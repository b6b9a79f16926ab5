package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/vigilcdn/vigil/plugins/node/agent"
)

// -proxy-poller reaches the proxy's options (loop by default).
func TestProxyPollerFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "loop"},
		{[]string{"-proxy-poller", "fifo"}, "fifo"},
		{[]string{"-proxy-poller", "go"}, "go"},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			var got agent.Config
			prev := newAgent
			t.Cleanup(func() { newAgent, spareProc = prev, true })
			spareProc = false
			newAgent = func(cfg agent.Config) (*agent.Agent, error) {
				got = cfg
				return nil, errStop
			}
			args := append([]string{"-proxy-listen", "127.0.0.1:0"}, tc.args...)
			if err := run(args); !errors.Is(err, errStop) {
				t.Fatalf("run: %v, want it to reach the agent", err)
			}
			if got.Proxy.Poller != tc.want {
				t.Errorf("Poller %q, want %q", got.Proxy.Poller, tc.want)
			}
		})
	}
}

// With the loops (and no GOMAXPROCS set), vigil-node runs a loop per P and
// keeps a P to spare (proxy.SpareProc); GOMAXPROCS set by hand is left alone.
func TestProxyLoopsSpareAProc(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		spare     bool
	}{
		{"GOMAXPROCS unset", "", true},
		{"GOMAXPROCS set", "3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procs := runtime.GOMAXPROCS(0)
			t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
			if tc.env != "" {
				t.Setenv("GOMAXPROCS", tc.env)
			} else {
				t.Setenv("GOMAXPROCS", "")
				os.Unsetenv("GOMAXPROCS")
			}
			var got agent.Config
			prev := newAgent
			t.Cleanup(func() { newAgent = prev })
			newAgent = func(cfg agent.Config) (*agent.Agent, error) {
				got = cfg
				return nil, errStop
			}
			if err := run([]string{"-proxy-listen", "127.0.0.1:0"}); !errors.Is(err, errStop) {
				t.Fatalf("run: %v, want it to reach the agent", err)
			}
			wantLoops, wantProcs := 0, procs
			if tc.spare {
				wantLoops, wantProcs = procs, procs+1
			}
			if got.Proxy.Loops != wantLoops || runtime.GOMAXPROCS(0) != wantProcs {
				t.Errorf("%d loops and GOMAXPROCS %d, want %d and %d", got.Proxy.Loops, runtime.GOMAXPROCS(0), wantLoops, wantProcs)
			}
		})
	}
}
