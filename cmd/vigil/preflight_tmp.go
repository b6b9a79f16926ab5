package main

import (
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

func preflight(*config.Config, bool, io.Writer) hcl.Diagnostics { return nil }
