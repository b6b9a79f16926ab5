package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

// devPluginDirs are where -dev looks for vigil-source-direct, after the
// folder of the vigil binary itself: the packages' plugin_dir.
var devPluginDirs = []string{"/usr/lib/vigil/plugins"}

// devSandbox prepares `vigil agent -dev`: three demo origins served by
// this process on loopback (a1 and a2 on level 1, b1 on level 2), a
// configuration in a new temporary folder that holds the state too, and
// an operator token. It returns the configuration's path and a stop that
// closes the origins and removes the folder.
func devSandbox(listen string, stderr io.Writer) (config string, stop func(), err error) {
	pluginDir, err := devPluginDir()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "vigil-dev-")
	if err != nil {
		return "", nil, fmt.Errorf("a folder for the sandbox: %w", err)
	}
	var servers []*http.Server
	stop = func() {
		for _, s := range servers {
			_ = s.Close()
		}
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	addrs := map[string]string{}
	for _, name := range []string{"a1", "a2", "b1"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, fmt.Errorf("demo origin %s: %w", name, err)
		}
		srv := &http.Server{Handler: demoorigin.New(name), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
		addrs[name] = "http://" + ln.Addr().String()
	}
	token := os.Getenv("VIGIL_TOKEN")
	if token == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return "", nil, err
		}
		token = hex.EncodeToString(b)
		if err := os.Setenv("VIGIL_TOKEN", token); err != nil {
			return "", nil, err
		}
	}
	config = filepath.Join(dir, "vigil.hcl")
	text := fmt.Sprintf(`# vigil agent -dev: a sandbox, gone when the agent stops.
control {
  round_interval = "2s"
  data_dir       = %q
  plugin_dir     = %q
  api {
    listen    = %q
    token_env = "VIGIL_TOKEN"
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

site "demo" {
  hostname = "demo.localhost"
  origin "a1" { address = %q }
  origin "a2" { address = %q }
  origin "b1" {
    address = %q
    level   = 2
  }
}
`, filepath.Join(dir, "data"), pluginDir, listen, addrs["a1"], addrs["a2"], addrs["b1"])
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(stderr, `vigil agent -dev: a sandbox with nothing kept (state in %s, removed at exit).
  site "demo": origins a1 %s and a2 %s on level 1, b1 %s on level 2
  fail one:    curl -X POST %s/-/fail     (and /-/recover)
  operator:    export VIGIL_TOKEN=%s
  then:        vigil status; vigil events -follow; the status page on the API's address
`, dir, addrs["a1"], addrs["a2"], addrs["b1"], addrs["a1"], token)
	return config, stop, nil
}

// devPluginDir is the first of the vigil binary's own folder and
// devPluginDirs that holds vigil-source-direct, or the folder of the one
// in PATH.
func devPluginDir() (string, error) {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			dirs = append(dirs, filepath.Dir(exe))
		}
	}
	dirs = append(dirs, devPluginDirs...)
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, "vigil-source-direct")); err == nil && st.Mode().IsRegular() {
			return d, nil
		}
	}
	if p, err := exec.LookPath("vigil-source-direct"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("-dev needs the plugin vigil-source-direct beside the vigil binary, in /usr/lib/vigil/plugins or in PATH: install the release tarball or package whole (make build puts it in bin/)")
}
