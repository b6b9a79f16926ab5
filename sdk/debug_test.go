package sdk_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

type debugSource struct{ sdk.BasePlugin }

func (debugSource) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-debug", Version: "0.0.1"}, nil
}

func (debugSource) ConfigSchema(context.Context) (sdk.Schema, error) { return sdk.Schema{}, nil }

func (debugSource) Configure(context.Context, sdk.Config) error { return nil }

func (debugSource) Vote(_ context.Context, b sdk.Ballot) ([]sdk.Vote, error) {
	votes := make([]sdk.Vote, 0, len(b.Targets))
	for _, t := range b.Targets {
		votes = append(votes, sdk.Vote{Site: t.Site, Origin: t.Origin, Voter: "debug", Value: sdk.Up, Reason: sdk.ReasonOK, Detail: "from the debug server"})
	}
	return votes, nil
}

// TestDebugMode serves a plugin in debug mode, reads the reattach string
// it prints, and has a host attach to it with sdk/host.ParseReattach over
// real gRPC on a unix socket: the vote comes back, the host's Kill leaves
// the server serving, and the plugin ends when its stop context does.
func TestDebugMode(t *testing.T) {
	stop, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	outR, outW := io.Pipe()
	t.Cleanup(func() { _ = outR.Close() })
	exited := make(chan error, 1)
	go func() {
		exited <- sdk.ServeDebug(func(sdk.Logger) sdk.VoteSource { return debugSource{} }, stop, outW, io.Discard)
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("read the reattach line: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	value, ok := strings.CutPrefix(strings.TrimSpace(line), sdk.ReattachEnv+"='")
	value, ok2 := strings.CutSuffix(value, "'")
	if !ok || !ok2 {
		t.Fatalf("the debug line %q is not %s='JSON'", line, sdk.ReattachEnv)
	}
	rcs, err := host.ParseReattach(value)
	if err != nil {
		t.Fatal(err)
	}
	rc := rcs["vigil-source-debug"]
	if len(rcs) != 1 || rc == nil || rc.Pid != os.Getpid() || rc.ProtocolVersion != sdk.ProtocolVersion || rc.Addr.Network() != "unix" || !rc.Test {
		t.Fatalf("reattach string %s reads as %+v", value, rcs)
	}

	vote := func() error {
		client := plugin.NewClient(&plugin.ClientConfig{
			HandshakeConfig:  host.Handshake,
			Plugins:          host.Plugins(nil)[rc.ProtocolVersion], // go-plugin reads no VersionedPlugins on reattach
			Reattach:         rc,
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
		})
		defer client.Kill() // a no-op in test mode: the server keeps serving
		rpc, err := client.Client()
		if err != nil {
			return err
		}
		raw, err := rpc.Dispense(host.PluginName)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		votes, err := raw.(host.Client).Vote(ctx, sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a", Address: "http://127.0.0.1:1"}}})
		if err != nil {
			return err
		}
		if len(votes) != 1 || votes[0].Detail != "from the debug server" {
			t.Errorf("votes %+v", votes)
		}
		return nil
	}
	for i := range 2 { // a second host attaches after the first left
		if err := vote(); err != nil {
			t.Fatalf("host %d: %v", i+1, err)
		}
	}
	cancel()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("debug serve ended with %v, want nil", err)
		}
	case <-time.After(time.Minute): // a hang guard only
		t.Fatal("debug serve did not end after its stop context")
	}
}

func TestParseReattachErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not json", "vigil-source-x", "not the JSON a plugin prints"},
		{"bad network", `{"x":{"protocol":"grpc","protocol_version":2,"pid":1,"addr":{"network":"udp","string":"a"}}}`, `plugin "x": address: network "udp"`},
		{"no pid", `{"x":{"protocol":"grpc","protocol_version":2,"addr":{"network":"unix","string":"/tmp/s"}}}`, `plugin "x": no pid`},
		{"netrpc", `{"x":{"protocol":"netrpc","protocol_version":2,"pid":1,"addr":{"network":"unix","string":"/tmp/s"}}}`, `want "grpc"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := host.ParseReattach(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), sdk.ReattachEnv) {
				t.Errorf("ParseReattach(%s) = %v, want an error naming %s and %q", tc.in, err, sdk.ReattachEnv, tc.want)
			}
		})
	}
}
