//go:build !faultinject

package main

import (
	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/engine"
)

// faultHooks is nil outside fault-injection builds (see fault_on.go).
func faultHooks(hclog.Logger) *engine.Hooks { return nil }
