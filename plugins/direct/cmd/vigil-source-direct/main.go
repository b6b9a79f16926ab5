// Command vigil-source-direct is vigil's own vote source: the control plane
// probes each origin itself. vigil starts it; it is not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/direct"
	"github.com/vigilcdn/vigil/sdk"
)

func main() {
	if isVersionArgs(os.Args[1:]) {
		fmt.Println(versionLine())
		return
	}
	// The SDK's Logger is an hclog.Logger (see sdk.Logger), which the
	// package's logging is written against.
	sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return direct.New(log.(hclog.Logger)) })
}
