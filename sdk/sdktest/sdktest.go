package sdktest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/host"
)

// InProcess serves impl over real gRPC on a local socket inside the test
// process and returns the host-side client, the same code vigil calls
// through. Everything is closed at the end of the test.
func InProcess(t testing.TB, impl sdk.VoteSource) sdk.VoteSource {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, host.Plugins(impl)[sdk.ProtocolVersion])
	t.Cleanup(func() {
		// Stop the server first: closing the client first sends a Shutdown
		// RPC whose handler stops the server too, and go-plugin's
		// GRPCServer.Stop is not safe to run twice at once.
		server.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(host.PluginName)
	if err != nil {
		t.Fatalf("sdktest: dispense vote source: %v", err)
	}
	return raw.(sdk.VoteSource)
}

// Build compiles the main package pkg (a directory such as
// "./cmd/vigil-source-mine" or an import path) into a temporary directory
// and returns the binary's path. It runs `go build` from the test's working
// directory, so relative paths are relative to the package under test.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sdktest: go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Launch starts the plugin binary at path as vigil does: go-plugin
// handshake, gRPC only, AutoMTLS, and no environment but env ("NAME=value"
// entries). Its log lines go to the test log. The process is killed at the
// end of the test.
func Launch(t testing.TB, path string, env ...string) sdk.VoteSource {
	t.Helper()
	cmd := exec.Command(path)
	cmd.Env = append([]string{}, env...)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  host.Handshake,
		VersionedPlugins: host.Plugins(nil),
		Cmd:              cmd,
		SkipHostEnv:      true,
		AutoMTLS:         true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     30 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   filepath.Base(path),
			Level:  hclog.Debug,
			Output: testWriter{t},
		}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("sdktest: start plugin %s: %v", path, err)
	}
	raw, err := rpc.Dispense(host.PluginName)
	if err != nil {
		t.Fatalf("sdktest: dispense vote source from %s: %v", path, err)
	}
	return raw.(sdk.VoteSource)
}

// Configure fetches src's schema, checks it (see [CheckSchema]) and that
// every value in cfg is declared with a matching Go type, and calls
// Configure. It fails the test on any
// error and returns nothing; use [ConfigureErr] to test rejected configs.
func Configure(t testing.TB, src sdk.VoteSource, cfg sdk.Config) {
	t.Helper()
	if err := ConfigureErr(t, src, cfg); err != nil {
		t.Fatalf("sdktest: configure: %v", err)
	}
}

// ConfigureErr is like [Configure] but returns the plugin's answer: nil,
// [sdk.Diagnostics], or another error. Schema mismatches still fail the test.
func ConfigureErr(t testing.TB, src sdk.VoteSource, cfg sdk.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := CheckSchema(t, src)
	declared := make(map[string]sdk.Attribute, len(schema.Attributes))
	for _, a := range schema.Attributes {
		declared[a.Name] = a
	}
	for name, v := range cfg.Values {
		a, ok := declared[name]
		if !ok {
			t.Fatalf("sdktest: config value %q is not in the plugin's schema", name)
		}
		if err := checkType(a.Type, v); err != nil {
			t.Fatalf("sdktest: config value %q: %v", name, err)
		}
	}
	for _, a := range schema.Attributes {
		if _, ok := cfg.Values[a.Name]; a.Required && !ok {
			t.Fatalf("sdktest: required config attribute %q is missing", a.Name)
		}
	}
	return src.Configure(ctx, cfg)
}

// CheckInfo calls src's Info and fails the test when the answer would
// mislead vigil: no name, no version, a capability this SDK does not know
// (a typo such as "tls.ca-bundle" is read as not declared, and vigil would
// hand the plugin none of the targets it was meant for) or one declared
// twice. Through [InProcess] or [Launch] it also checks what the SDK
// fills: the protocol version and the SDK version. It returns the Info.
func CheckInfo(t testing.TB, src sdk.BasePlugin) sdk.Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := src.Info(ctx)
	if err != nil {
		t.Fatalf("sdktest: Info: %v", err)
	}
	if info.Name == "" || info.Version == "" {
		t.Errorf("sdktest: Info names no plugin or no version: %+v", info)
	}
	if _, remote := src.(host.SuspectWatcher); remote && (info.ProtocolVersion != sdk.ProtocolVersion || info.SDKVersion != sdk.Version) {
		t.Errorf("sdktest: Info over the wire says protocol %d, SDK %q; this SDK serves protocol %d, SDK %s",
			info.ProtocolVersion, info.SDKVersion, sdk.ProtocolVersion, sdk.Version)
	}
	known := sdk.KnownCapabilities()
	seen := map[string]bool{}
	for _, c := range info.Capabilities {
		switch {
		case seen[c]:
			t.Errorf("sdktest: Info declares capability %q twice", c)
		case !slices.Contains(known, c):
			t.Errorf("sdktest: Info declares capability %q, which this SDK does not know (vigil would read it as not declared); the known ones: %s",
				c, strings.Join(known, ", "))
		}
		seen[c] = true
	}
	return info
}

// CheckSchema fetches src's ConfigSchema and fails the test, as vigil
// refuses the plugin, when the schema is invalid (see [sdk.Schema.Validate]):
// a duplicate or non-identifier name, a missing type. It returns the schema.
func CheckSchema(t testing.TB, src sdk.BasePlugin) sdk.Schema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema, err := src.ConfigSchema(ctx)
	if err != nil {
		t.Fatalf("sdktest: config schema: %v", err)
	}
	if err := schema.Validate(); err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	return schema
}

func checkType(typ sdk.Type, v any) error {
	ok := false
	switch typ {
	case sdk.TypeString:
		_, ok = v.(string)
	case sdk.TypeNumber:
		_, ok = v.(float64)
	case sdk.TypeBool:
		_, ok = v.(bool)
	case sdk.TypeStringList:
		_, ok = v.([]string)
	case sdk.TypeDuration:
		_, ok = v.(time.Duration)
	}
	if !ok {
		return fmt.Errorf("the schema says %s but the value is a Go %T", typ, v)
	}
	return nil
}

// CheckVotes fails the test for every vote that vigil would drop (see
// sdk.CheckVotes, the very function vigil's host calls): a vote for a target
// not in the ballot, a Value other than Up, Down or Abstain, an Abstain
// without a reason, an invalid voter id, a malformed PluginReason, or a
// second vote of one voter for one target.
func CheckVotes(t testing.TB, ballot sdk.Ballot, votes []sdk.Vote) {
	t.Helper()
	for _, p := range sdk.CheckVotes(ballot, votes) {
		t.Errorf("vote %d: %v", p.Index, p.Err)
	}
}

// ValidateVotes returns an error listing every vote that vigil would drop:
// a thin wrapper of sdk.CheckVotes.
//
// Deprecated: call sdk.CheckVotes, the one vote checker (vigil's host
// calls it on every answer), or CheckVotes in a test. ValidateVotes stays
// for plugins written against SDK v0.2.0 and goes at v1.
func ValidateVotes(ballot sdk.Ballot, votes []sdk.Vote) error {
	var errs []error
	for _, p := range sdk.CheckVotes(ballot, votes) {
		errs = append(errs, fmt.Errorf("vote %d: %w", p.Index, p.Err))
	}
	return errors.Join(errs...)
}

// testWriter sends plugin log lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}
