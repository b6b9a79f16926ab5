package pluginhost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// testPlugin is the path of the testsource plugin, built once by TestMain;
// v1Plugin that of testdata/v1source, the frozen protocol-1 plugin.
var testPlugin, v1Plugin string

const helperEnv = "PLUGINHOST_TEST_HELPER_PLUGIN"

func TestMain(m *testing.M) {
	if p := os.Getenv(helperEnv); p != "" {
		runHelperHost(p)
		return
	}
	dir, err := os.MkdirTemp("", "pluginhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testPlugin = filepath.Join(dir, "vigil-source-test")
	v1Plugin = filepath.Join(dir, "vigil-source-v1")
	for path, pkg := range map[string]string{testPlugin: "./testdata/testsource", v1Plugin: "./testdata/v1source"} {
		out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build test plugin %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runHelperHost is the host process of TestNoOrphanAfterHostSIGKILL: it
// starts the plugin, prints its pid and waits to be killed.
func runHelperHost(plugin string) {
	src := New(Spec{Name: "helper", Plugin: plugin, Config: parseConfig(nil, `voter = "h"`)})
	if diags := src.Start(context.Background()); diags.HasErrors() {
		fmt.Fprintln(os.Stderr, diags.Error())
		os.Exit(1)
	}
	fmt.Println(src.PID())
	select {}
}

// parseConfig parses src as the body of a config block in file config.hcl.
func parseConfig(t testing.TB, src string) hcl.Body {
	f, diags := hclsyntax.ParseConfig([]byte(src), "config.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		if t == nil {
			panic(diags.Error())
		}
		t.Fatalf("parse: %v", diags)
	}
	return f.Body
}

// newSource starts a testsource with the given config body and spec tweaks.
func newSource(t *testing.T, config string, tweak func(*Spec)) (*Source, *sdktest.LogBuffer) {
	t.Helper()
	logs := &sdktest.LogBuffer{}
	spec := Spec{
		Name:    "test",
		Plugin:  testPlugin,
		Timeout: 20 * time.Second,
		Config:  parseConfig(t, config),
		Logger:  hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
	}
	if tweak != nil {
		tweak(&spec)
	}
	src := New(spec)
	t.Cleanup(src.Close)
	if diags := src.Start(context.Background()); diags.HasErrors() {
		t.Fatalf("Start: %v\nlogs:\n%s", diags, logs)
	}
	return src, logs
}

// processGone reports whether pid no longer runs (a zombie counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesized command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// waitFor polls cond until it holds. within is what the wait takes on a
// slow idle machine; the deadline, guardFor(within), only catches a hang
// (the suite must pass with CPU-bound processes beside it).
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	guard := guardFor(within)
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (a hang guard, not a speed bound)", guard, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// guardFor is the deadline of a wait that takes up to d on an idle
// machine: five times d, and at least a minute.
func guardFor(d time.Duration) time.Duration { return max(5*d, time.Minute) }
