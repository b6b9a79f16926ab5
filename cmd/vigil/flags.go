package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/agext/levenshtein"
)

// newFlags is a command's flag set. It prints nothing itself: parseFlags
// words the errors and the help.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, whose flags may come anywhere among the
// positional arguments (`vigil status www -json` as well as `vigil status
// -json www`; a lone "--" ends the flags), and returns the positional ones.
// When ok is false the command stops with code: 0 after -h or -help (the
// flags were listed on stdout), 2 after a bad flag or value (said on
// stderr, with the flag it most likely meant).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	pos, err := parseArgs(fs, args)
	switch {
	case err == nil:
		return pos, 0, true
	case errors.Is(err, flag.ErrHelp):
		writeFlags(stdout, fs)
		return nil, 0, false
	}
	msg := err.Error()
	if name, found := strings.CutPrefix(msg, "flag provided but not defined: -"); found {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg = fmt.Sprintf("unknown flag -%s%s", name, didYouMean(strings.TrimLeft(name, "-"), names))
	}
	fmt.Fprintf(stderr, "vigil %s: %s\nRun 'vigil %s -h' for its flags.\n", fs.Name(), msg, fs.Name())
	return nil, 2, false
}

// parseArgs parses flags wherever they appear among the positional
// arguments and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// writeFlags lists a flag set's flags, as Go's flag package does, under
// "Flags:"; nothing for a command without flags.
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "Flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// didYouMean is `; did you mean "x"?` for the candidate nearest to got,
// when one is near enough to be a typo; else "".
func didYouMean(got string, candidates []string) string {
	best, bestD := "", 3 // at most two edits away
	for _, c := range candidates {
		d := levenshtein.Distance(got, c, nil)
		if d > 0 && sameLetters(got, c) {
			d-- // letters swapped, as in "stauts": one slip, not two
		}
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" {
		for _, c := range candidates { // a prefix, such as -stat for -status
			if len(got) >= 3 && strings.HasPrefix(c, got) {
				return fmt.Sprintf("; did you mean %q?", c)
			}
		}
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func sameLetters(a, b string) bool {
	x, y := []byte(a), []byte(b)
	slices.Sort(x)
	slices.Sort(y)
	return string(x) == string(y)
}

// choiceFlag is a string flag that takes one of a fixed set of words.
type choiceFlag struct {
	value   string
	choices []string
}

func newChoice(def string, choices ...string) *choiceFlag {
	return &choiceFlag{value: def, choices: choices}
}

func (c *choiceFlag) String() string {
	if c == nil {
		return ""
	}
	return c.value
}

func (c *choiceFlag) Set(s string) error {
	for _, ch := range c.choices {
		if s == ch {
			c.value = s
			return nil
		}
	}
	sorted := append([]string(nil), c.choices...)
	sort.Strings(sorted)
	return fmt.Errorf("must be one of %s%s", strings.Join(c.choices, ", "), didYouMean(s, sorted))
}
