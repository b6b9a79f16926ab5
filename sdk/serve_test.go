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
		var out, errb bytes.Buffer
		code := byHand(byHandSource{}, tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out.String(), errb.String())
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
