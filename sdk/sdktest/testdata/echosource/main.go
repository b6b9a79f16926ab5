// Command echosource is a test vote source: it votes Up for every target,
// as voter "echo" (or the configured voter), with every Target field echoed
// into Detail.
package main

import (
	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest/internal/echo"
)

func main() {
	sdk.Serve(func(sdk.Logger) sdk.VoteSource { return echo.New() })
}
