package main

import (
	"fmt"
	"runtime/debug"
)

// version and commit are set when the binary is linked (make build, make
// dist): -ldflags "-X main.version=... -X main.commit=... -X main.date=...". Without them
// the commit Go recorded from a checkout is shown. date is the commit's
// time (make dist).
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// versionLine is "vigil-node VERSION (commit C, GO)", what -version prints.
func versionLine() string {
	rev, goVersion := commit, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && rev == "" {
				rev = s.Value
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "unknown"
	}
	if date != "" {
		goVersion = "built " + date + ", " + goVersion
	}
	return fmt.Sprintf("vigil-node %s (commit %s, %s)", version, rev, goVersion)
}

// isVersionArgs reports whether args (without the program name) ask for
// the version only.
func isVersionArgs(args []string) bool {
	return len(args) == 1 && (args[0] == "-version" || args[0] == "--version")
}
