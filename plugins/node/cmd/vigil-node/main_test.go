package main

import (
	"errors"
	"fmt"
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
			t.Cleanup(func() { newAgent = prev })
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
