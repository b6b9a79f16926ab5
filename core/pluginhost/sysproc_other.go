//go:build !linux

package pluginhost

import "os/exec"

// setDeathSignal does nothing outside Linux; plugins built with sdk.Serve
// watch their parent themselves.
func setDeathSignal(*exec.Cmd) {}
