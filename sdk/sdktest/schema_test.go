package sdktest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest/internal/echo"
)

// schemaSource is the echo source with the schema of the test.
type schemaSource struct {
	sdk.VoteSource
	schema sdk.Schema
}

func (s schemaSource) ConfigSchema(context.Context) (sdk.Schema, error) { return s.schema, nil }

// schemaFatal records a Fatalf instead of ending the test.
type schemaFatal struct {
	testing.TB
	msg string
}

func (r *schemaFatal) Fatalf(format string, args ...any) {
	r.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	panic(r)
}

func (r *schemaFatal) Helper() {}

func TestCheckSchema(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attrs  []sdk.Attribute
		reason string // "" for a valid schema
	}{
		{"valid", []sdk.Attribute{{Name: "voter", Type: sdk.TypeString}, {Name: "max-conns", Type: sdk.TypeNumber}}, ""},
		{"empty", nil, ""},
		{"duplicate", []sdk.Attribute{{Name: "voter", Type: sdk.TypeString}, {Name: "voter", Type: sdk.TypeNumber}}, `"voter" is declared twice`},
		{"not an identifier", []sdk.Attribute{{Name: "2fast", Type: sdk.TypeBool}}, "is not an HCL identifier"},
		{"space", []sdk.Attribute{{Name: "a b", Type: sdk.TypeBool}}, "is not an HCL identifier"},
		{"no name", []sdk.Attribute{{Type: sdk.TypeBool}}, "has no name"},
		{"no type", []sdk.Attribute{{Name: "voter"}}, "has no valid type"},
		{"unknown type", []sdk.Attribute{{Name: "voter", Type: 42}}, "has no valid type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := InProcess(t, schemaSource{echo.New(), sdk.Schema{Attributes: tc.attrs}})
			r := &schemaFatal{TB: t}
			func() {
				defer func() {
					if p := recover(); p != nil && p != r {
						panic(p)
					}
				}()
				CheckSchema(r, src)
			}()
			switch {
			case tc.reason == "" && r.msg != "":
				t.Errorf("CheckSchema refused a valid schema: %s", r.msg)
			case tc.reason != "" && !strings.Contains(r.msg, tc.reason):
				t.Errorf("CheckSchema said %q, want it to say %q", r.msg, tc.reason)
			}
		})
	}
}

// TestValidateVotesRefusesDuplicates: sdktest refuses a second vote of one
// voter for one target, as vigil drops it.
func TestValidateVotesRefusesDuplicates(t *testing.T) {
	b := sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1"}}}
	v := sdk.Vote{Site: "www", Origin: "a1", Voter: "n1", Value: sdk.Up, Reason: sdk.ReasonOK}
	if err := ValidateVotes(b, []sdk.Vote{v, v}); err == nil || !strings.Contains(err.Error(), "second vote") {
		t.Errorf("ValidateVotes = %v, want the duplicate refused", err)
	}
	if err := ValidateVotes(b, []sdk.Vote{v, {Site: "www", Origin: "a1", Voter: "n2", Value: sdk.Down, Reason: sdk.ReasonTimeout}}); err != nil {
		t.Errorf("two voters refused: %v", err)
	}
}
