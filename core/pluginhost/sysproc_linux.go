package pluginhost

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL the plugin when the host dies,
// even by SIGKILL.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
