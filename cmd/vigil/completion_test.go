package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestShellCompletion runs the built vigil as bash's `complete -C` does
// (what vigil -autocomplete-install sets up): COMP_LINE and COMP_POINT in
// the environment, the completions on standard output.
func TestShellCompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built binary")
	}
	tests := []struct {
		line string
		want []string
	}{
		{"vigil rel", []string{"reload"}},
		{"vigil ev", []string{"events"}},
		{"vigil origin ", []string{"disable", "enable"}},
		{"vigil st", []string{"state", "status"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			fields := strings.Fields(tt.line)
			cur := ""
			if !strings.HasSuffix(tt.line, " ") {
				cur = fields[len(fields)-1]
			}
			cmd := exec.Command(filepath.Join(binDir, "vigil"), "vigil", cur, fields[len(fields)-1])
			cmd.Env = append(os.Environ(), "COMP_LINE="+tt.line, "COMP_POINT="+strconv.Itoa(len(tt.line)))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("completing %q: %v", tt.line, err)
			}
			got := strings.Fields(string(out))
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("completing %q = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}
