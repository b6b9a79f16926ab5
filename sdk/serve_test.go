package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

type byHandSource struct{ VoteSource }

func (byHandSource) Info(context.Context) (Info, error) {
	return Info{Name: "vigil-source-x", Version: "1.2", Capabilities: []string{CapabilityAbstain}}, nil
}
func (byHandSource) ConfigSchema(context.Context) (Schema, error) {
	return Schema{Attributes: []Attribute{{Name: "port", Type: TypeNumber, Required: true, Description: "The port."}}}, nil
}

func TestRunByHand(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"-version"}, 0, "vigil-source-x 1.2 (vigil vote-source protocol 2, SDK " + Version + ")\n", ""},
		{[]string{"-schema"}, 0, `"name": "port"`, ""},
		{nil, 1, "", "is a vigil vote-source plugin"},
	} {
		var out bytes.Buffer
		err := byHand(byHandSource{}, tc.args, &out)
		code, msg := 0, ""
		if err != nil {
			code, msg = 1, err.Error()
		}
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(msg, tc.err) {
			t.Errorf("%v: exit %d, stdout %q, error %q", tc.args, code, out.String(), msg)
		}
		if len(tc.args) > 0 && tc.args[0] == "-schema" {
			var d schemaDump
			if err := json.Unmarshal(out.Bytes(), &d); err != nil || len(d.Attributes) != 1 || d.Attributes[0].Type != TypeNumber || !d.Attributes[0].Required ||
				d.ProtocolVersion != ProtocolVersion || d.SDKVersion != Version || len(d.Capabilities) != 1 || d.Capabilities[0] != CapabilityAbstain {
				t.Errorf("-schema JSON %s does not read back: %v %+v", out.String(), err, d)
			}
		}
	}
}

// TestServeAndRun: run by hand without a flag, Serve prints what the
// binary is and exits with status 1; Run returns that as its error and
// ends nothing. With -version both answer and Serve does not exit.
func TestServeAndRun(t *testing.T) {
	factory := func(Logger) VoteSource { return byHandSource{} }
	for _, tc := range []struct {
		name     string
		args     []string
		exit     int // -1: no exit
		stdout   string
		stderr   string
		runError string
	}{
		{"no flag", nil, 1, "", "is a vigil vote-source plugin", "is a vigil vote-source plugin"},
		{"version", []string{"-version"}, -1, "vigil-source-x 1.2", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			exit := -1
			cfg := serveConfig{args: tc.args, stdout: &out, stderr: &errb, exit: func(c int) { exit = c }, getenv: func(string) string { return "" }}
			serveWith(factory, cfg)
			if exit != tc.exit || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("Serve: exit %d, stdout %q, stderr %q; want exit %d", exit, out.String(), errb.String(), tc.exit)
			}
			out.Reset()
			errb.Reset()
			cfg.exit = func(c int) { t.Errorf("Run exited with %d", c) }
			err := run(factory, cfg)
			if tc.runError == "" && err != nil || tc.runError != "" && (err == nil || !strings.Contains(err.Error(), tc.runError)) {
				t.Errorf("Run = %v, want an error saying %q", err, tc.runError)
			}
			if errb.Len() != 0 {
				t.Errorf("Run printed on stderr: %q", errb.String())
			}
		})
	}
}
