package docs

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/plugins/direct"
	"github.com/vigilcdn/vigil/plugins/dnspup"
	"github.com/vigilcdn/vigil/plugins/node"
	"github.com/vigilcdn/vigil/sdk"
)

// refUpdate rewrites docs/config.md instead of comparing it.
var refUpdate = flag.Bool("update", false, "rewrite docs/config.md from core/config's reference and the shipped plugins' ConfigSchema")

// refFile is the generated configuration reference, relative to docs/.
const refFile = "config.md"

// refRegenerate is how to regenerate refFile.
const refRegenerate = "go test ./docs -run TestConfigReference -update"

// TestConfigReference renders the configuration reference from
// core/config.Reference and the shipped plugins' ConfigSchema, and
// compares it with docs/config.md (with -update, rewrites the file).
func TestConfigReference(t *testing.T) {
	got := refRender(t)
	if strings.Contains(got, "shared/") {
		t.Fatalf("the reference mentions shared/, which is outside the repository: word it without")
	}
	if *refUpdate {
		if err := os.WriteFile(refFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/%s", refFile)
		return
	}
	b, err := os.ReadFile(refFile)
	if os.IsNotExist(err) {
		t.Fatalf("docs/%s is missing; generate it: %s", refFile, refRegenerate)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := string(b); want != got {
		line, have, gen := refFirstDiff(want, got)
		t.Fatalf("docs/%s is stale: it is not what core/config/reference.go and the plugins' ConfigSchema give.\n"+
			"First difference, line %d:\n  file:      %q\n  generated: %q\n"+
			"Do not edit docs/%s by hand; regenerate it: %s", refFile, line, have, gen, refFile, refRegenerate)
	}
}

// refFirstDiff returns the first line (1-based) where a and b differ, and
// that line of each ("" past the end).
func refFirstDiff(a, b string) (int, string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return i + 1, x, y
		}
	}
	return 0, "", ""
}

// refPlugin is one shipped plugin, its settings described by its own
// ConfigSchema.
type refPlugin struct {
	short  string // its source name in the examples
	plugin sdk.BasePlugin
	about  string // what it is, for operators
	// example is a source block using it, in canonical style.
	example string
	// configure, when set, is the plugin's Configure, without side
	// effects: the example's settings must satisfy it.
	configure func(sdk.Config) error
}

func refPlugins() []refPlugin {
	d := direct.New(nil)
	return []refPlugin{
		{
			short: "node", plugin: node.New(nil),
			about: "The node gateway: the operator's edge nodes (`vigil-node`) attach to it, and each round it hands them the origins to probe; each node's answer is one vote. Nodes must authenticate: set `token_env` (a shared token), `client_ca_file` (mTLS), or both. See [plugins/node/README.md](../plugins/node/README.md).",
			example: `source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen          = "0.0.0.0:8471"
    token_env       = "VIGIL_NODE_TOKEN"
    nodes_per_round = 3
    online_timeout  = "15s"
    site_labels     = ["www: region=eu"]
    status_listen   = "127.0.0.1:8472"
  }
}
`,
		},
		{
			short: "dnspup", plugin: dnspup.New(nil, dnspup.Options{}),
			about: "Votes from the checkpoints of the dnspup probing network, through its Customer API: one vote per checkpoint and origin. The API key and secret are read from the environment, so list their variables in the source's `env`. A site whose `health_check` asks for what dnspup cannot check (`expected_body`, `headers`, `ca_file`, `tls_server_name`) gets an abstention from it. See [plugins/dnspup/README.md](../plugins/dnspup/README.md).",
			example: `source "dnspup" {
  plugin    = "vigil-source-dnspup"
  min_votes = 2
  tally     = "carry"
  env       = ["DNSPUP_API_KEY", "DNSPUP_API_SECRET"]
  config {
    checkpoints        = ["ams-1", "fra-1", "lon-1"]
    ip_version         = "4"
    requests_per_round = 10
  }
}
`,
		},
		{
			short: "direct", plugin: d,
			about: "vigil's own probe, from the agent's machine: it probes every origin it is handed in the round, the starts spread over part of its time. Every setting may be left out.",
			example: `source "direct" {
  plugin = "vigil-source-direct"
  config {
    concurrency = 2000
    spread      = 0.2
    voter       = "direct-ams"
  }
}
`,
			configure: func(c sdk.Config) error { return d.Configure(context.Background(), c) },
		},
	}
}

// refExample is the complete example of the introduction.
const refExample = `control {
  round_interval = "30s"
  data_dir       = "/var/lib/vigil"
  plugin_dir     = "/usr/lib/vigil"

  api {
    listen    = "127.0.0.1:8470"
    token_env = "VIGIL_TOKEN"
  }
}

# The chain, in this order: the operator's edge nodes (two must agree),
# then dnspup checkpoints whose votes add to the nodes' votes, then vigil's
# own probe for whatever is still unsettled.
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
  env       = ["VIGIL_NODE_TOKEN"]
  config {
    listen    = "0.0.0.0:8471"
    token_env = "VIGIL_NODE_TOKEN"
  }
}

source "dnspup" {
  plugin    = "vigil-source-dnspup"
  min_votes = 2
  tally     = "carry"
  env       = ["DNSPUP_API_KEY", "DNSPUP_API_SECRET"]
  config {
    checkpoint_count = 3
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

site "www" {
  hostname = "www.example.com"

  health_check {
    path = "/cdn-health"
  }

  origin "a1" { address = "https://203.0.113.10" }
  origin "a2" { address = "https://203.0.113.11" }
  origin "b1" {
    address = "https://backup.example.net"
    level   = 2
  }
}

notify "webhook" "ops" {
  url = "https://hooks.example.com/vigil"
}
`

// refSite makes a source block loadable on its own.
const refSite = `
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "https://203.0.113.10" }
  origin "a2" { address = "https://203.0.113.11" }
}
`

// refIntro is the hand-written part of the page, before the blocks.
func refIntro() string {
	return `## Loading

Every command that takes ` + "`-config PATH`" + ` (and ` + "`vigil validate PATH`" + `) takes one
file, or a folder: then every ` + "`*.hcl`" + ` file directly in it (not in sub-folders;
other files are ignored), read in file-name order and merged as if they were
one file. Blocks may be in any file; ` + "`control`" + ` and ` + "`publish \"dns\"`" + ` appear at
most once in all of them, names (of sources, sites, notifiers) are unique
across them, and the vote chain is the order of the ` + "`source`" + ` blocks across the
files. A folder without a ` + "`*.hcl`" + ` file is an error.

Every mistake is reported as an HCL diagnostic with file:line:col, and
nothing is loaded; ` + "`vigil validate PATH`" + ` reports them all, and launches the
plugins to check their ` + "`config`" + ` blocks (` + "`-offline`" + ` does not). ` + "`vigil fmt`" + `
rewrites files in the canonical style. SIGHUP makes the agent reload the
configuration; ` + "`data_dir`" + ` and the ` + "`store`" + ` block take effect at the next
restart.

## Types

| type | written as |
|---|---|
| string | ` + "`\"text\"`" + ` |
| whole number | ` + "`500`" + ` (no quotes) |
| bool | ` + "`true`" + ` or ` + "`false`" + ` |
| duration | a string: a number and a unit (` + "`ns`, `us`, `ms`, `s`, `m`, `h`" + `), such as ` + "`\"30s\"`, `\"500ms\"`, `\"1m30s\"`" + ` |
| size | a whole number of bytes, or a string with a unit, such as ` + "`\"256KiB\"`" + ` |
| list of ... | ` + "`[\"a\", \"b\"]`" + `, ` + "`[200, 204]`" + ` |
| map of string | ` + "`{ \"X-Name\" = \"value\" }`" + ` |

A plugin's ` + "`number`" + ` is any number, such as ` + "`0.2`" + `.

## Relative paths

- ` + "`data_dir`, `plugin_dir`, `token_file`" + `, and a source's ` + "`plugin`" + ` given as a path
  (with a ` + "`/`" + `) are relative to the **agent's working directory** (where
  ` + "`vigil agent`" + ` was started), not to the configuration file. So are the paths
  in a plugin's ` + "`config`" + ` block (the node gateway's ` + "`tls_cert_file`" + `, ...): plugins
  run in the agent's working directory. ` + "`vigil state check -config C`" + ` reads
  ` + "`data_dir`" + ` from C relative to where it runs. Give absolute paths in a
  service's configuration, or set the service's working directory.
- ` + "`ca_file`" + ` (in ` + "`health_check`" + `) is the exception: it is relative to the folder of
  the file that names it.

## Environment variables

Secrets stay out of the files: an attribute whose name ends in ` + "`_env`" + ` holds
the *name* of an environment variable, whose value is used.

- Read by the agent, from its own environment, when it starts and at every
  reload: ` + "`control { api { token_env } }`" + `, and ` + "`username_env`" + ` and ` + "`password_env`" + `
  of ` + "`control { store \"etcd\" }`" + `.
- Read by a plugin: the node gateway's ` + "`token_env`" + `, dnspup's ` + "`api_key_env`" + ` and
  ` + "`api_secret_env`" + `. A plugin sees only the variables its source lists in
  ` + "`env = [...]`" + ` (nothing else of the agent's environment, not even ` + "`PATH`" + `), so
  list them there too.

## sites_per_round = auto

With ` + "`control { sites_per_round = \"auto\" }`" + ` the agent sizes each round itself,
from the time the last rounds really took, within the round's budget:
` + "`round_interval`" + ` less the engine's part, min(round_interval/10, 2s) (28 s of a
30 s round). Before each round it looks at the last five rounds, each with
the sites it probed and its time (votes and commit included):

1. No round yet (at start, or a standby that becomes active): 500.
2. The last round ran over the budget, or a source ran out of time in it
   (` + "`out_of_time`" + ` abstentions): shrink at once, from that round alone, to 3/4
   of the smaller of its sites and its sites per second times the budget.
3. Otherwise: 3/4 of the five rounds' sites per second (their sites over
   their time) times the budget, and at most twice the sites the last
   round probed. Rounds that took no measurable time leave only the
   doubling.
4. Then never below 500, the default (auto never probes fewer sites a
   round than leaving ` + "`sites_per_round`" + ` out does), and never above the sites
   this instance may probe (health check on, two enabled origins; in
   sharded mode its own share: each instance sizes its own rounds).

So a round fills about 3/4 of the budget at the pace the last rounds
showed, at most doubling from one round to the next, and a round that ran
late makes the next one smaller at once: a black-hole storm that slows the
probes shrinks the rounds rather than making them overrun. For example,
750 sites whose primaries black-hole, their first 500 probed in 7.8 s of a
28 s budget: the next round takes all 750 (1,345 would fit, twice 500 is
allowed), where a fixed 500 probes each site every other round.

The 500 still counts where no round has been timed: ` + "`confirm_budget`" + ` is a per
cent of it, a sharded instance's takeover round probes at most 500, and
` + "`vigil validate`" + ` and the agent's start warn of a cycle counted at 500 a round
(the longest it can be), saying the rounds grow from there. The open-file
check and the etcd transaction note count every site, the most a round
can grow to. The size of each round is ` + "`vigil_round_sites_limit`" + `
([metrics.md](metrics.md)); ` + "`vigil status`" + ` counts its cycle with the last
round's size and says so ("each site probed every 30s (sites_per_round
auto: 750 sites last round)"); the log says when a round is sized down.
` + "`vigil simulate`" + ` has no real time: there every round probes every eligible site,
as if probes took no time ([simulate.md](simulate.md)).

## A complete example

A control plane with the three shipped sources and one site of two primary
origins and a backup; every setting left out takes its default.

` + "```hcl\n" + refExample + "```\n"
}

// refRender is the whole of docs/config.md.
func refRender(t *testing.T) string {
	t.Helper()
	ref := config.Reference()
	plugins := refPlugins()
	schemas := map[string]sdk.Schema{}
	infos := map[string]sdk.Info{}
	for _, p := range plugins {
		info, err := p.plugin.Info(context.Background())
		if err != nil {
			t.Fatalf("%s: Info: %v", p.short, err)
		}
		s, err := p.plugin.ConfigSchema(context.Background())
		if err != nil {
			t.Fatalf("%s: ConfigSchema: %v", info.Name, err)
		}
		schemas[p.short], infos[p.short] = s, info
		refCheckExample(t, info.Name, p.example+refSite, map[string]sdk.Schema{p.short: s}, p.configure)
	}
	refCheckExample(t, "the complete example", refExample, schemas, nil)

	var b strings.Builder
	b.WriteString("<!-- Code generated by `" + refRegenerate + "`. DO NOT EDIT. -->\n\n")
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("> This page is generated from `core/config/reference.go` (the blocks and\n" +
		"> attributes the loader accepts) and the shipped plugins' `ConfigSchema`. Do\n" +
		"> not edit it: change those and run `" + refRegenerate + "`.\n" +
		"> `go test ./docs` fails while it is stale.\n\n")
	b.WriteString(refIntro())

	b.WriteString("\n## Blocks\n\n")
	for _, blk := range ref {
		depth := strings.Count(refParentChain(ref, blk), ">")
		fmt.Fprintf(&b, "%s- [%s](#%s)", strings.Repeat("  ", depth), refTitleText(blk), refSlug(refTitleText(blk)))
		if blk.Plugin {
			var links []string
			for _, p := range plugins {
				links = append(links, fmt.Sprintf("[%s](#%s)", infos[p.short].Name, refSlug(infos[p.short].Name)))
			}
			fmt.Fprintf(&b, ": the plugin's own, %s", strings.Join(links, ", "))
		}
		b.WriteString("\n")
	}
	for _, blk := range ref {
		refRenderBlock(&b, ref, blk)
	}

	b.WriteString("\n## Plugin settings\n\n")
	b.WriteString("What each shipped plugin accepts in its source's `config { }` block, from\n" +
		"its `ConfigSchema`. When the plugin is started, vigil decodes the block\n" +
		"against it (an attribute it does not declare, a required one missing, a\n" +
		"value that does not convert to the type or a duration that does not parse\n" +
		"is an error at its line), and the plugin then checks the values. The\n" +
		"defaults are in the meanings.\n")
	for _, p := range plugins {
		info, s := infos[p.short], schemas[p.short]
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\n", info.Name, p.about)
		b.WriteString("| attribute | type | required | meaning |\n|---|---|---|---|\n")
		for _, a := range s.Attributes {
			req := "no"
			if a.Required {
				req = "**yes**"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", a.Name, refCell(a.Type.String()), req, refCell(refLinks(a.Description)))
		}
		b.WriteString("\n```hcl\n" + p.example + "```\n")
	}
	return b.String()
}

// refParentChain is the block's ancestry, "a>b>c".
func refParentChain(ref []config.RefBlock, blk config.RefBlock) string {
	s := blk.Type
	for p := blk.Parent; p != ""; {
		i := slices.IndexFunc(ref, func(b config.RefBlock) bool { return b.Path == p })
		s = ref[i].Type + ">" + s
		p = ref[i].Parent
	}
	return s
}

// refWritten is the block's header as written: `origin "NAME"`.
func refWritten(blk config.RefBlock) string {
	s := blk.Type
	for _, l := range blk.Labels {
		if l.Fixed != "" {
			s += " " + strconv.Quote(l.Fixed)
		} else {
			s += " " + strconv.Quote(strings.ToUpper(l.Name))
		}
	}
	return s
}

// refTitleText is the block's heading, and its name in the index.
func refTitleText(blk config.RefBlock) string {
	s := "`" + refWritten(blk) + "`"
	if blk.Parent != "" {
		s += " in `" + blk.Parent + "`"
	}
	return s
}

// refSlug is the anchor GitHub gives a heading.
func refSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// refDocLink makes the mentions of docs/X.md links.
var refDocLink = regexp.MustCompile(`\bdocs/([a-z]+\.md)\b`)

func refLinks(s string) string { return refDocLink.ReplaceAllString(s, "[$1]($1)") }

// refCell is s made safe for a table cell.
func refCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// refCode is s as a code span in a table cell.
func refCode(s string) string { return "`" + refCell(s) + "`" }

func refRenderBlock(b *strings.Builder, ref []config.RefBlock, blk config.RefBlock) {
	fmt.Fprintf(b, "\n### %s\n\n", refTitleText(blk))
	fmt.Fprintf(b, "%s\n\n", refLinks(blk.Meaning))
	fmt.Fprintf(b, "- **How many:** %s\n", blk.Repeat)
	for _, l := range blk.Labels {
		if l.Fixed != "" {
			fmt.Fprintf(b, "- **Label** `%q`: %s\n", l.Fixed, l.Meaning)
		} else {
			fmt.Fprintf(b, "- **Label** `%s`: %s\n", strings.ToUpper(l.Name), l.Meaning)
		}
	}
	if blk.Plugin {
		b.WriteString("\nIts attributes are the plugin's: see [Plugin settings](#plugin-settings).\n")
		return
	}
	b.WriteString("\n| attribute | type | default | meaning | example |\n|---|---|---|---|---|\n")
	for _, a := range blk.Attributes {
		def := "**required**"
		switch {
		case a.Default != "" && a.DefaultNote != "":
			def = refCode(a.Default) + " (" + refCell(refLinks(a.DefaultNote)) + ")"
		case a.Default != "":
			def = refCode(a.Default)
		case a.DefaultNote != "":
			def = refCell(refLinks(a.DefaultNote))
		}
		meaning := a.Meaning
		if a.Instead != "" {
			meaning += " An alternative to " + a.Instead + "."
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", a.Name, refCell(a.Type), def, refCell(refLinks(meaning)), refCode(a.Example))
	}
	b.WriteString("\n```hcl\n" + refBlockExample(ref, blk) + "```\n")
}

// refBlockExample is the block with every attribute set to its example
// (an alternative as a comment), inside its parents.
func refBlockExample(ref []config.RefBlock, blk config.RefBlock) string {
	var chain []config.RefBlock
	for p := blk; ; {
		chain = append([]config.RefBlock{p}, chain...)
		if p.Parent == "" {
			break
		}
		p = ref[slices.IndexFunc(ref, func(b config.RefBlock) bool { return b.Path == p.Parent })]
	}
	var s strings.Builder
	for i, c := range chain {
		indent := strings.Repeat("  ", i)
		s.WriteString(indent + c.Type)
		for _, l := range c.Labels {
			v := l.Fixed
			if v == "" {
				v = l.Example
			}
			s.WriteString(" " + strconv.Quote(v))
		}
		s.WriteString(" {\n")
	}
	indent := strings.Repeat("  ", len(chain))
	for _, a := range blk.Attributes {
		if a.Instead == "" {
			fmt.Fprintf(&s, "%s%s = %s\n", indent, a.Name, a.Example)
		}
	}
	for _, a := range blk.Attributes {
		if a.Instead != "" {
			fmt.Fprintf(&s, "%s# or, instead of %s:\n%s# %s = %s\n", indent, a.Instead, indent, a.Name, a.Example)
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		s.WriteString(strings.Repeat("  ", i) + "}\n")
	}
	return string(hclwrite.Format([]byte(s.String())))
}

// refCheckExample loads src with the loader (no error, no warning), and
// checks each source's config block against its plugin's schema: every
// attribute declared and of its type, every required one set; configure,
// when given, must accept the values.
func refCheckExample(t *testing.T, what, src string, schemas map[string]sdk.Schema, configure func(sdk.Config) error) {
	t.Helper()
	if f := string(hclwrite.Format([]byte(src))); f != src {
		t.Errorf("%s is not in canonical style (vigil fmt); it should read:\n%s", what, f)
	}
	cfg, diags := config.Parse("example.hcl", []byte(src))
	if len(diags) > 0 {
		t.Fatalf("%s does not load cleanly: %v\n%s", what, diags, src)
	}
	for _, s := range cfg.Sources {
		schema, ok := schemas[s.Name]
		if !ok {
			t.Fatalf("%s: source %q has no plugin schema here", what, s.Name)
		}
		values := map[string]any{}
		if s.Config != nil {
			attrs, d := s.Config.JustAttributes()
			if d.HasErrors() {
				t.Fatalf("%s: source %q: config: %v", what, s.Name, d)
			}
			for name, attr := range attrs {
				i := slices.IndexFunc(schema.Attributes, func(a sdk.Attribute) bool { return a.Name == name })
				if i < 0 {
					t.Errorf("%s: source %q: the plugin declares no config attribute %q", what, s.Name, name)
					continue
				}
				v, d := attr.Expr.Value(nil)
				if d.HasErrors() {
					t.Errorf("%s: source %q: %s: %v", what, s.Name, name, d)
					continue
				}
				gv, err := refValue(schema.Attributes[i].Type, v)
				if err != nil {
					t.Errorf("%s: source %q: %s is not a %s: %v", what, s.Name, name, schema.Attributes[i].Type, err)
					continue
				}
				values[name] = gv
			}
		}
		for _, a := range schema.Attributes {
			if _, set := values[a.Name]; a.Required && !set {
				t.Errorf("%s: source %q: the plugin requires %q in config", what, s.Name, a.Name)
			}
		}
		if configure != nil {
			if err := configure(sdk.Config{Values: values}); err != nil {
				t.Errorf("%s: the plugin refuses the settings: %v", what, err)
			}
		}
	}
}

// refValue converts v to the Go value the plugin gets for type ty.
func refValue(ty sdk.Type, v cty.Value) (any, error) {
	switch ty {
	case sdk.TypeString, sdk.TypeDuration:
		if v.Type() != cty.String {
			return nil, fmt.Errorf("got %s", v.Type().FriendlyName())
		}
		if ty == sdk.TypeString {
			return v.AsString(), nil
		}
		d, err := time.ParseDuration(v.AsString())
		if err == nil && d <= 0 {
			err = fmt.Errorf("%s is not greater than zero", d)
		}
		return d, err
	case sdk.TypeNumber:
		if v.Type() != cty.Number {
			return nil, fmt.Errorf("got %s", v.Type().FriendlyName())
		}
		f, _ := v.AsBigFloat().Float64()
		return f, nil
	case sdk.TypeBool:
		if v.Type() != cty.Bool {
			return nil, fmt.Errorf("got %s", v.Type().FriendlyName())
		}
		return v.True(), nil
	case sdk.TypeStringList:
		if !v.Type().IsTupleType() && !v.Type().IsListType() {
			return nil, fmt.Errorf("got %s", v.Type().FriendlyName())
		}
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.Type() != cty.String {
				return nil, fmt.Errorf("an element is %s", e.Type().FriendlyName())
			}
			out = append(out, e.AsString())
		}
		return out, nil
	}
	return nil, fmt.Errorf("type %s is not known here", ty)
}
