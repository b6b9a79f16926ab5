// Command vigil is the operator's binary: the daemon and the tools around it.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/hashicorp/cli"
)

// version, commit and date are set at build time with -ldflags "-X
// main.version=... -X main.commit=... -X main.date=..." (make build sets
// the version and commit, make dist all three); a commit Go recorded in
// the binary itself is used when there is none.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// command is one of vigil's commands, as its help shows it.
type command struct {
	// name is how it is called: "status", or "origin disable" for a
	// subcommand.
	name string
	// synopsis is the one line of the command list.
	synopsis string
	// usage is the line after "Usage: ", such as "vigil switch SITE LEVEL
	// [flags]".
	usage string
	// help is what the command does, in a few lines (optional).
	help string
	// run runs it. Every run parses its flags with parseFlags before it
	// does anything else, so that run([]string{"-h"}, ...) only prints the
	// flags: that is how the help learns them.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]*command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("vigil: command registered twice: " + c.name)
	}
	commands[c.name] = &c
}

func init() {
	register(command{
		name: "version", synopsis: "print the version and the build's commit",
		usage: "vigil version",
		run: func(args []string, stdout, stderr io.Writer) int {
			fs := newFlags("version")
			if _, code, ok := parseFlags(fs, args, stdout, stderr); !ok {
				return code
			}
			fmt.Fprintln(stdout, versionLine())
			return 0
		},
	})
}

// versionLine is "vigil VERSION (commit C[, modified], GO)", with the
// commit Go recorded in the binary when it was built from a checkout.
func versionLine() string {
	rev, modified, goVersion := buildRevision()
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "unknown"
	}
	line := fmt.Sprintf("vigil %s (commit %s", version, rev)
	if modified {
		line += ", modified"
	}
	if date != "" {
		line += ", built " + date
	}
	if goVersion != "" {
		line += ", " + goVersion
	}
	return line + ")"
}

// buildCommit is the build's commit, short, "" when unknown.
func buildCommit() string {
	rev, _, _ := buildRevision()
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev
}

// buildRevision is the commit set at link time, or the one Go recorded.
func buildRevision() (rev string, modified bool, goVersion string) {
	rev = commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	return rev, modified, goVersion
}

// cliCommand is a command as hashicorp/cli runs it.
type cliCommand struct {
	c              *command
	stdout, stderr io.Writer
}

func (k cliCommand) Synopsis() string { return k.c.synopsis }

func (k cliCommand) Run(args []string) int { return k.c.run(args, k.stdout, k.stderr) }

// Help is the usage line, what the command does, and its flags.
func (k cliCommand) Help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n", k.c.usage)
	if k.c.synopsis != "" {
		fmt.Fprintf(&b, "\n  %s%s.\n", strings.ToUpper(k.c.synopsis[:1]), k.c.synopsis[1:])
	}
	if k.c.help != "" {
		b.WriteString("\n")
		for _, line := range strings.Split(strings.TrimRight(k.c.help, "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("  " + line + "\n")
		}
	}
	if k.c.run != nil {
		var flags bytes.Buffer
		k.c.run([]string{"-h"}, &flags, io.Discard)
		if flags.Len() > 0 {
			b.WriteString("\n")
			b.Write(flags.Bytes())
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// usage is the top-level help: every command and its synopsis.
func usage(w io.Writer) {
	fmt.Fprint(w, topHelp())
}

func topHelp() string {
	var b strings.Builder
	b.WriteString("vigil: the CDN origin health control plane\n\nUsage: vigil COMMAND [flags] [args]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-15s %s\n", n, commands[n].synopsis)
	}
	b.WriteString("\nRun 'vigil help COMMAND' or 'vigil COMMAND -h' for a command's flags;\n'vigil -version' prints the version; 'vigil -autocomplete-install' sets up\nshell completion of the commands (bash, zsh, fish).\n")
	return b.String()
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs vigil with args (without the program name). Exit codes: 0 done,
// 1 failed, 2 usage error (an unknown command, flag or value).
func run(args []string, stdout, stderr io.Writer) int {
	// A shell asking for completions (after vigil -autocomplete-install)
	// runs vigil with COMP_LINE set: hashicorp/cli answers it.
	if os.Getenv("COMP_LINE") == "" {
		var code int
		if args, code = checkArgs(args, stdout, stderr); code >= 0 {
			return code
		}
	}
	factories := make(map[string]cli.CommandFactory, len(commands))
	for name, c := range commands {
		k := cliCommand{c: c, stdout: stdout, stderr: stderr}
		factories[name] = func() (cli.Command, error) { return k, nil }
	}
	c := &cli.CLI{
		Name:     "vigil",
		Args:     args,
		Version:  versionLine(),
		Commands: factories,
		// Shell completion of the commands: vigil -autocomplete-install
		// adds it to bash's, zsh's or fish's start-up file.
		Autocomplete: true,
		HelpFunc:     func(map[string]cli.CommandFactory) string { return strings.TrimRight(topHelp(), "\n") },
		HelpWriter:   stdout,
		ErrorWriter:  stderr,
	}
	code, err := c.Run()
	if err != nil {
		fmt.Fprintf(stderr, "vigil: %v\n", err)
		return 1
	}
	return code
}

// checkArgs answers what hashicorp/cli would get wrong: no command, "help
// COMMAND", an unknown command or top-level flag. It returns the args to
// run and -1, or the exit code when it answered.
func checkArgs(args []string, stdout, stderr io.Writer) ([]string, int) {
	if len(args) == 0 {
		usage(stderr)
		return nil, 2
	}
	if args[0] == "help" { // vigil help [COMMAND [SUBCOMMAND]]
		if len(args) == 1 {
			usage(stdout)
			return nil, 0
		}
		args = append(append([]string{}, args[1:]...), "-help")
	}
	if name := args[0]; strings.HasPrefix(name, "-") {
		switch name {
		case "-h", "-help", "--help", "-v", "-version", "--version", "-autocomplete-install", "-autocomplete-uninstall":
		default:
			fmt.Fprintf(stderr, "vigil: unknown flag %s: flags go after the command, as in 'vigil status -json'\nRun 'vigil help' for the commands.\n", name)
			return nil, 2
		}
	} else if _, ok := commands[name]; !ok {
		fmt.Fprintf(stderr, "vigil: unknown command %q%s\nRun 'vigil help' for the commands.\n", name, didYouMean(name, commandWords()))
		return nil, 2
	}
	return args, -1
}

// commandWords are the first words of the commands: what can follow
// "vigil".
func commandWords() []string {
	seen := map[string]bool{}
	var words []string
	for n := range commands {
		w, _, _ := strings.Cut(n, " ")
		if !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	sort.Strings(words)
	return words
}

// subcommandGroup registers a command, such as "origin", whose work is
// done by its subcommands ("origin disable"): run alone, or with a word
// that is none of them, it says which there are.
func subcommandGroup(name, synopsis string) {
	register(command{
		name: name, synopsis: synopsis, usage: "vigil " + name + " SUBCOMMAND [flags] [args]",
		run: func(args []string, stdout, stderr io.Writer) int {
			var subs []string
			for n := range commands {
				if sub, ok := strings.CutPrefix(n, name+" "); ok {
					subs = append(subs, sub)
				}
			}
			sort.Strings(subs)
			if len(args) == 1 && (args[0] == "-h" || args[0] == "-help") {
				return 0 // the subcommand list is the help
			}
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				fmt.Fprintf(stderr, "vigil %s: unknown subcommand %q%s\n", name, args[0], didYouMean(args[0], subs))
			} else {
				fmt.Fprintf(stderr, "vigil %s: give a subcommand: %s\n", name, strings.Join(subs, ", "))
			}
			fmt.Fprintf(stderr, "Run 'vigil help %s SUBCOMMAND' for its flags.\n", name)
			return 2
		},
	})
}
