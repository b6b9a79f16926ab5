// Command vigil-source-node is the node gateway vote source: the operator's
// vigil-node agents attach to it and probe origins for vigil. vigil starts
// it; it is not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node"
	"github.com/vigilcdn/vigil/sdk"
)

func main() {
	if isVersionArgs(os.Args[1:]) {
		fmt.Println(versionLine())
		return
	}
	// The SDK's Logger is an hclog.Logger (see sdk.Logger), which the
	// package's logging is written against.
	sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return node.New(log.(hclog.Logger)) })
}
