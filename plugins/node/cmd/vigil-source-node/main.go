// Command vigil-source-node is the node gateway vote source: the operator's
// vigil-node agents attach to it and probe origins for vigil. vigil starts
// it; it is not run by hand.
package main

import (
	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/node"
	"github.com/vigilcdn/vigil/sdk"
)

func main() {
	sdk.Serve(func(log hclog.Logger) sdk.VoteSource { return node.New(log) })
}
