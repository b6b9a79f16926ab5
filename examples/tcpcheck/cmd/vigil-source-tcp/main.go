// Command vigil-source-tcp is an example vigil vote source, a narrow
// check: an origin is down when a TCP connection to it fails; it abstains
// on the rest. vigil starts it; see ../../README.md.
package main

import (
	"fmt"
	"os"

	"github.com/vigilcdn/vigil/examples/tcpcheck"
	"github.com/vigilcdn/vigil/sdk"
)

func main() {
	if isVersionArgs(os.Args[1:]) {
		fmt.Println(versionLine())
		return
	}
	sdk.Serve(func(log sdk.Logger) sdk.VoteSource { return tcpcheck.New(log) })
}
