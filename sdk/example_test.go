package sdk_test

import (
	"context"
	"fmt"
	"os"

	"github.com/vigilcdn/vigil/sdk"
)

type mySource struct{ log sdk.Logger }

func (s *mySource) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "vigil-source-mine", Version: "1.0.0"}, nil
}
func (s *mySource) ConfigSchema(context.Context) (sdk.Schema, error) { return sdk.Schema{}, nil }
func (s *mySource) Configure(context.Context, sdk.Config) error      { return nil }
func (s *mySource) Vote(context.Context, sdk.Ballot) ([]sdk.Vote, error) {
	return nil, nil
}

// A plugin's whole main.
func ExampleServe() {
	if os.Getenv("VIGIL_VOTE_SOURCE_PLUGIN") == "" {
		return // run by vigil only (an Example must not block)
	}
	sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return &mySource{log: log} })
}

// Serve takes options; new ones come without breaking plugins.
func ExampleServe_options() {
	if os.Getenv("VIGIL_VOTE_SOURCE_PLUGIN") == "" {
		return
	}
	sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return &mySource{log: log} }, sdk.WithLogLevel("info"))
}

func ExampleSchema_Validate() {
	s := sdk.Schema{Attributes: []sdk.Attribute{
		{Name: "voter", Type: sdk.TypeString},
		{Name: "voter", Type: sdk.TypeNumber},
	}}
	fmt.Println(s.Validate())
	// Output: invalid config schema: attribute 1: name "voter" is declared twice
}

func ExampleCheckVotes() {
	ballot := sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1"}}}
	votes := []sdk.Vote{
		{Site: "www", Origin: "a1", Voter: "n1", Value: sdk.Up, Reason: sdk.ReasonOK},
		{Site: "www", Origin: "a1", Voter: "n1", Value: sdk.Down, Reason: sdk.ReasonTimeout},
		{Site: "www", Origin: "zz", Voter: "n1", Value: sdk.Up},
	}
	for _, p := range sdk.CheckVotes(ballot, votes) {
		fmt.Println(p.Index, p.Err)
	}
	// Output:
	// 1 second vote of voter "n1" for www/a1
	// 2 vote for site "www" origin "zz", which was not in the ballot
}

func ExampleAttributeError() {
	err := sdk.Diagnostics{sdk.AttributeError("port", "Invalid port", "a whole number from 1 to 65535")}.Err()
	fmt.Println(err)
	// Output: port: Invalid port: a whole number from 1 to 65535
}

// A probe's reason (package sdk/probe) is the name of an sdk.Reason.
func ExampleParseReason() {
	r, ok := sdk.ParseReason("tls_failed")
	fmt.Println(r == sdk.ReasonTLSFailed, ok)
	// Output: true true
}

// A plugin-specific reason refines a standard one.
func ExampleValidPluginReason() {
	v := sdk.Vote{Site: "www", Origin: "a1", Voter: "tls", Value: sdk.Down,
		Reason: sdk.ReasonTLSFailed, PluginReason: "tlscheck/cert_expiring", Detail: "expires in 3 days"}
	fmt.Println(sdk.ValidPluginReason(v.PluginReason), sdk.ValidPluginReason("Cert Expiring"))
	// Output: true false
}
