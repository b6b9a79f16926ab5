package pluginhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/vigilcdn/vigil/sdk"
)

// TestInvalidSchemaRefused: a plugin whose schema declares an attribute
// twice is refused at its start, with the reason, instead of the last
// duplicate silently winning.
func TestInvalidSchemaRefused(t *testing.T) {
	t.Setenv("VIGIL_TEST_SCHEMA", "duplicate")
	src := New(Spec{Name: "test", Plugin: testPlugin, Env: []string{"VIGIL_TEST_SCHEMA"}, Config: parseConfig(t, `voter = "v"`)})
	t.Cleanup(src.Close)
	diags := src.Start(context.Background())
	if !diags.HasErrors() {
		t.Fatal("Start accepted a schema that declares voter twice")
	}
	if d := diags[0]; d.Summary != "Plugin declares an invalid config schema" || !strings.Contains(d.Detail, `"voter" is declared twice`) {
		t.Errorf("diagnostic = %v", d)
	}
}

// TestPluginReason: a namespaced plugin reason travels with the vote as a
// field of its own, the detail left as the plugin wrote it; a malformed
// one drops the vote, as
// sdktest.CheckVotes says it would.
func TestPluginReason(t *testing.T) {
	src, _ := newSource(t, `voter = "v"`, nil)
	b := ballot("pluginreason", 1)
	votes, err := src.Vote(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	want := sdk.Vote{Site: "pluginreason", Origin: "o0", Voter: "v", Value: sdk.Down, Reason: sdk.ReasonTLSFailed,
		PluginReason: "testsource/cert_expiring", Detail: "expires in 3 days"}
	if len(votes) != 1 || votes[0] != want {
		t.Errorf("kept %+v, want only %+v", votes, want)
	}
	if st := src.Stats(); st.DroppedVotes != 1 {
		t.Errorf("dropped %d votes, want 1 (the malformed plugin reason)", st.DroppedVotes)
	}
}

// TestCheckVotesIsSdktests: the host and sdktest refuse the same votes, a
// second vote of one voter for one target included.
func TestCheckVotesIsSdktests(t *testing.T) {
	b := sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1"}}}
	votes := []sdk.Vote{
		{Site: "www", Origin: "a1", Voter: "v", Value: sdk.Up, Reason: sdk.ReasonOK},
		{Site: "www", Origin: "a1", Voter: "v", Value: sdk.Down, Reason: sdk.ReasonTimeout},
	}
	src := &Source{log: hclog.NewNullLogger()}
	kept := src.keepValid(b, append([]sdk.Vote(nil), votes...))
	problems := sdk.CheckVotes(b, votes)
	if len(kept) != 1 || len(problems) != 1 || !strings.Contains(problems[0].Err.Error(), "second vote") {
		t.Errorf("host kept %d of 2, sdk.CheckVotes said %v: they must both refuse the duplicate", len(kept), problems)
	}
}

// TestCleanStopIsNotAnError: the agent's clean stop (SIGINT or SIGTERM ends
// in Close) ends the plugin without an ERROR line.
func TestCleanStopIsNotAnError(t *testing.T) {
	src, logs := newSource(t, `voter = "v"`, nil)
	if _, err := src.Vote(context.Background(), ballot("www", 1)); err != nil {
		t.Fatal(err)
	}
	src.Close()
	logs.WaitFor(t, 10*time.Second, "plugin process exited")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "[ERROR]") {
			t.Errorf("a clean stop logged an error: %s", line)
		}
	}
}

// TestChecksumMismatchPointsAtChecksum: the agent's own start points a
// checksum mismatch at the `checksum` attribute, as vigil validate does.
func TestChecksumMismatchPointsAtChecksum(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.hcl")
	src := fmt.Sprintf("source \"test\" {\n  plugin   = %q\n  checksum = \"sha256:%064d\"\n}\n", testPlugin, 0)
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig([]byte(src), file, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	decl := f.Body.(*hclsyntax.Body).Blocks[0].DefRange()
	s := New(Spec{Name: "test", Plugin: testPlugin, Checksum: fmt.Sprintf("sha256:%064d", 0), Range: decl})
	t.Cleanup(s.Close)
	diags = s.Start(context.Background())
	if !diags.HasErrors() {
		t.Fatal("Start accepted a binary whose checksum does not match")
	}
	d := diags[0]
	if d.Summary != "Plugin binary does not match its checksum" || d.Subject == nil || d.Subject.Start.Line != 3 {
		t.Errorf("diagnostic %q at %v, want the checksum mismatch at line 3", d.Summary, d.Subject)
	}
}
