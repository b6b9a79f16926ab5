package sdk

import (
	"context"
	"io"

	"github.com/hashicorp/go-hclog"
)

// ServeDebug serves factory in debug mode until stop ends, printing on
// stdout and stderr, for the tests of package sdk_test.
func ServeDebug(factory Factory, stop context.Context, stdout, stderr io.Writer) error {
	return serveDebug(factory, serveConfig{level: hclog.Debug, stdout: stdout, stderr: stderr, stop: stop})
}
