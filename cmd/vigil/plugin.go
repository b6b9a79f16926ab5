package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/pluginhost"
)

func init() {
	subcommandGroup("plugin", "what a vote-source plugin is and accepts")
	register(command{
		name: "plugin docs", synopsis: "print a plugin's configuration reference, from its schema",
		usage: "vigil plugin docs [-plugin-dir DIR] [-json] PLUGIN",
		help: `Starts the plugin PLUGIN as the agent does (a bare name is looked up in
-plugin-dir, then in PATH; a path is used as it is, relative to the working
directory), asks for its name, version, protocol, capabilities and config
schema, stops it, and prints the attributes of its source's config block
with their meanings, in Markdown (the form of docs/config.md), or as JSON
with -json. Nothing is configured: any vote-source plugin answers, in any
language.`,
		run: runPluginDocs,
	})
}

func runPluginDocs(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("plugin docs")
	dir := fs.String("plugin-dir", config.DefaultPluginDir, "the folder where a bare PLUGIN name is looked up first, before PATH")
	asJSON := fs.Bool("json", false, "print the schema as JSON")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "vigil plugin docs: want one PLUGIN (a binary name or path), got %d arguments\nRun 'vigil plugin docs -h' for its flags.\n", len(pos))
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, schema, err := pluginhost.Describe(ctx, pluginhost.Spec{Name: "docs", Plugin: pos[0], PluginDir: *dir})
	if err != nil {
		fmt.Fprintf(stderr, "vigil plugin docs: %v\n", err)
		return 1
	}
	if *asJSON {
		caps := info.Capabilities
		if caps == nil {
			caps = []string{}
		}
		b, err := json.MarshalIndent(struct {
			Name            string   `json:"name"`
			Version         string   `json:"version"`
			ProtocolVersion int      `json:"protocol_version"`
			SDKVersion      string   `json:"sdk_version,omitempty"`
			Capabilities    []string `json:"capabilities"`
			Attributes      any      `json:"attributes"`
		}{info.Name, info.Version, info.ProtocolVersion, info.SDKVersion, caps, schema.Attributes}, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "vigil plugin docs: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	caps := "none"
	if len(info.Capabilities) > 0 {
		caps = "`" + strings.Join(info.Capabilities, "`, `") + "`"
	}
	fmt.Fprintf(stdout, "### %s\n\nVersion %s, vote-source protocol %d, capabilities: %s. What it accepts in its source's `config { }` block:\n\n", info.Name, info.Version, info.ProtocolVersion, caps)
	if len(schema.Attributes) == 0 {
		fmt.Fprintln(stdout, "No attributes: the block must be empty or absent.")
		return 0
	}
	fmt.Fprint(stdout, pluginhost.SchemaMarkdown(schema))
	return 0
}
