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
			got := captureAgent(t)
			spareProc = false
			t.Cleanup(func() { spareProc = true })
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
			got := captureAgent(t)
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

// captureAgent makes run stop at the agent (with errStop) and returns the
// config it would have started.
func captureAgent(t *testing.T) *agent.Config {
	got := &agent.Config{}
	prev := newAgent
	t.Cleanup(func() { newAgent = prev })
	newAgent = func(cfg agent.Config) (*agent.Agent, error) {
		*got = cfg
		return nil, errStop
	}
	return got
}
