// Command vigil-source-dnspup is the dnspup vote-source plugin. vigil starts
// it; it is not meant to be run by hand. See package
// github.com/vigilcdn/vigil/plugins/dnspup for its settings.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/plugins/dnspup"
	"github.com/vigilcdn/vigil/sdk"
)

func main() {
	if isVersionArgs(os.Args[1:]) {
		fmt.Println(versionLine())
		return
	}
	// The SDK's Logger is an hclog.Logger (see sdk.Logger), which the
	// package's logging is written against.
	sdk.Serve(func(log sdk.Logger) sdk.VoteSource {
		return dnspup.New(log.(hclog.Logger), dnspup.Options{})
	})
}
