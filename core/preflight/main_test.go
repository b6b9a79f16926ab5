package preflight_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// binDir holds the real plugins, built once by TestMain: the plugin_dir of
// every test configuration.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "preflight-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("go", "build", "-o", dir+"/",
			"github.com/vigilcdn/vigil/plugins/direct/cmd/vigil-source-direct",
			"github.com/vigilcdn/vigil/plugins/node/cmd/vigil-source-node")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the plugins:", err)
			return 1
		}
		binDir = dir
		return m.Run()
	}())
}
