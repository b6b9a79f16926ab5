package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/nodeagent"
)

// -canary-interval reaches the agent: the default, 0 as no canaries, a
// duration as given; a negative one is refused, naming the flag.
func TestCanaryIntervalFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, nodeagent.DefaultCanaryInterval},
		{[]string{"-canary-interval", "0"}, nodeagent.NoCanaries},
		{[]string{"-canary-interval", "2s"}, 2 * time.Second},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got := captureAgent(t)
			if err := run(append([]string{"-proxy-listen", "127.0.0.1:0"}, tc.args...)); !errors.Is(err, errStop) {
				t.Fatalf("run: %v", err)
			}
			if got.CanaryInterval != tc.want {
				t.Fatalf("CanaryInterval = %v, want %v", got.CanaryInterval, tc.want)
			}
		})
	}
	captureAgent(t)
	err := run([]string{"-proxy-listen", "127.0.0.1:0", "-canary-interval", "-1s"})
	if err == nil || errors.Is(err, errStop) || !strings.Contains(err.Error(), "-canary-interval") {
		t.Fatalf("run with -canary-interval -1s: %v, want an error naming the flag", err)
	}
}
