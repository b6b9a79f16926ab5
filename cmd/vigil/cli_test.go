package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseArgsInterspersed(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"www", "-json"}, []string{"www"}, true},
		{[]string{"-json", "www"}, []string{"www"}, true},
		{[]string{"disable", "www", "a1", "-json"}, []string{"disable", "www", "a1"}, true},
		{[]string{"www"}, []string{"www"}, false},
		{[]string{"--", "-odd"}, []string{"-odd"}, false},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		j := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || *j != tt.json {
			t.Errorf("parseArgs(%v) = %v %v json=%v; want %v json=%v", tt.args, pos, err, *j, tt.pos, tt.json)
		}
	}
}
