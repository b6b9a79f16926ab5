package sdktest_test

import (
	"fmt"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

// ValidateVotes tells a plugin's test which of its votes vigil would drop,
// by the rules vigil's host applies.
func ExampleValidateVotes() {
	ballot := sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1"}}}
	votes := []sdk.Vote{
		{Site: "www", Origin: "a1", Voter: "edge-1", Value: sdk.Up, Reason: sdk.ReasonOK},
		{Site: "www", Origin: "a1", Voter: "edge-1", Value: sdk.Down, Reason: sdk.ReasonTimeout}, // a second vote of edge-1
		{Site: "www", Origin: "zz", Voter: "edge-1", Value: sdk.Up, Reason: sdk.ReasonOK},        // not in the ballot
	}
	err := sdktest.ValidateVotes(ballot, votes)
	dropped := err.(interface{ Unwrap() []error }).Unwrap()
	fmt.Println(len(dropped), "of", len(votes), "votes would be dropped")
	// Output: 2 of 3 votes would be dropped
}
