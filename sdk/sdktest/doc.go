// Package sdktest helps vote-source authors test their plugin the way vigil
// runs it.
//
// [InProcess] serves a VoteSource over real gRPC inside the test process,
// so a test can call it through the same client vigil uses and still set
// breakpoints in the plugin. [Build] and [Launch] compile the plugin's main
// package and start it as a real subprocess with the go-plugin handshake,
// AutoMTLS and an empty environment, as vigil does. [CheckInfo] checks the
// plugin's Info (a capability name this SDK does not know is most likely a
// typo that vigil reads as not declared). [CheckVotes] checks an
// answer against the rules of the VoteSource contract, and [Suspects]
// reads what a plugin's sdk.SuspectReporter reports, over the same stream
// vigil reads.
//
//	func TestMySource(t *testing.T) {
//		src := sdktest.Launch(t, sdktest.Build(t, "./cmd/vigil-source-mine"))
//		sdktest.Configure(t, src, sdk.Config{Values: map[string]any{"port": 443.0}})
//		ballot := sdk.Ballot{Targets: []sdk.Target{{Site: "www", Origin: "a1", Address: "https://127.0.0.1:8443"}}}
//		votes, err := src.Vote(context.Background(), ballot)
//		if err != nil {
//			t.Fatal(err)
//		}
//		sdktest.CheckVotes(t, ballot, votes)
//	}
package sdktest
