package pluginhost

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// TestPlaintextTransport: with AutoMTLS off the plugin starts and votes
// over a plaintext socket, and the host warns that it does.
func TestPlaintextTransport(t *testing.T) {
	logs := &sdktest.LogBuffer{}
	src := New(Spec{Name: "plain", Plugin: testPlugin, PlaintextTransport: true, Timeout: 20 * time.Second,
		Config: parseConfig(t, `voter = "v"`), Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs})})
	t.Cleanup(src.Close)
	if d := src.Start(context.Background()); d.HasErrors() {
		t.Fatal(d.Error())
	}
	votes, err := src.Vote(context.Background(), ballot("www", 2))
	if err != nil || len(votes) != 2 {
		t.Fatalf("Vote over plaintext = %v, %v", votes, err)
	}
	logs.WaitFor(t, time.Second, "[WARN]", "without mutual TLS")
}
