package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pythonWithGRPC returns a Python 3 that imports grpc, protobuf and
// cryptography (Debian: python3-grpcio, python3-cryptography, which `make
// deps` installs for /usr/bin/python3). Without one the test skips, or
// fails when CI is set.
func pythonWithGRPC(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		tried = append(tried, path)
		if exec.Command(path, "-c", "import grpc, google.protobuf, cryptography").Run() == nil {
			return path
		}
	}
	msg := fmt.Sprintf("no Python 3 with grpcio, protobuf and cryptography (tried %v): make deps installs python3-grpcio and python3-cryptography", tried)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestEndToEndPythonPlugin runs examples/python-votesource, a plugin in
// another language speaking the published protocol with AutoMTLS, through a
// real agent: its votes settle the origins, its namespaced plugin reason
// reaches operators, a failed origin switches the site, and the agent's
// clean stop on SIGTERM logs no ERROR about the plugin's exit.
func TestEndToEndPythonPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the real binaries")
	}
	py := pythonWithGRPC(t)
	script, err := filepath.Abs("../../examples/python-votesource/plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "vigil-source-python-tcp")
	if err := os.WriteFile(plugin, []byte(fmt.Sprintf("#!/bin/sh\nexec %q %q \"$@\"\n", py, script)), 0o755); err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	a1, b1 := listen(), listen()
	config := filepath.Join(dir, "vigil.hcl")
	cfg := fmt.Sprintf(`
control {
  round_interval = "300ms"
  data_dir       = %q
  api {
    listen    = "127.0.0.1:0"
    token_env = "VIGIL_TOKEN"
  }
}
source "python" {
  plugin  = %q
  timeout = "2s"
  config {
    voter = "py-e2e"
  }
}
site "www" {
  hostname = "www.example.com"
  health_check {
    timeout             = "500ms"
    unhealthy_threshold = 2
    healthy_threshold   = 1
  }
  origin "a1" { address = "http://%s" }
  origin "b1" {
    address = "http://%s"
    level   = 2
  }
}
`, filepath.Join(dir, "data"), plugin, a1.Addr(), b1.Addr())
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgentProc(t, config)
	waitFor(t, "level 1 to turn healthy on the Python plugin's votes", 30*time.Second, func() bool {
		return agent.site(t, "www")["levels"].(map[string]any)["1"] == "healthy"
	})
	if log := agent.logText(); !strings.Contains(log, "serving") || !strings.Contains(log, "mtls=true") {
		t.Errorf("the plugin's JSON log line (serving, mtls=true) is not in the agent's log")
	}

	a1.Close() // connections to a1 are now refused
	waitFor(t, "the switch to level 2", 30*time.Second, func() bool {
		return agent.site(t, "www")["level"].(float64) == 2
	})
	b, _ := json.Marshal(agent.site(t, "www"))
	if !strings.Contains(string(b), "pythontcp/refused") || !strings.Contains(string(b), "py-e2e") {
		t.Errorf("the site does not show the plugin's vote and its plugin reason pythontcp/refused:\n%s", b)
	}

	pid := agent.pluginPID(t, "python")
	if err := agent.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-agent.done:
	case <-time.After(hangGuard(30 * time.Second)):
		t.Fatalf("the agent did not stop within %s of SIGTERM", hangGuard(30*time.Second))
	}
	waitFor(t, "the plugin process to end", 10*time.Second, func() bool { return processGone(pid) })
	for _, line := range strings.Split(agent.logText(), "\n") {
		if strings.Contains(line, "[ERROR]") && strings.Contains(line, "plugin") {
			t.Errorf("the clean stop logged an error about the plugin: %s", line)
		}
	}
}
