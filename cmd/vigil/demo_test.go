package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// The demo's own binaries, which TestMain does not build: they join the
// others in binDir, once.
var (
	demoBinOnce sync.Once
	demoBinErr  error
)

func demoBinaries(t *testing.T) string {
	t.Helper()
	if binDir == "" {
		t.Skip("no binaries: TestMain builds them only without -short")
	}
	demoBinOnce.Do(func() {
		args := []string{"build", "-o", binDir + "/"}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args,
			"github.com/vigilcdn/vigil/examples/demo-origin/cmd/vigil-demo-origin",
			"github.com/vigilcdn/vigil/plugins/dnspup/cmd/vigil-fake-dnspup")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			demoBinErr = fmt.Errorf("building the demo's binaries: %v\n%s", err, out)
		}
	})
	if demoBinErr != nil {
		t.Fatal(demoBinErr)
	}
	return binDir
}

// demoEnv is the environment that runs examples/demo.sh on the binaries in
// bin, with its state in data and every port moved off the defaults: api is
// the API's port, the others are free ports.
func demoEnv(t *testing.T, bin, data string, api int) []string {
	t.Helper()
	free := make([]int, 6)
	for i := range free {
		_, p, _ := net.SplitHostPort(testnet.Addr(t)) // reserved for the test, not only picked
		free[i], _ = strconv.Atoi(p)
	}
	env := append(os.Environ(), // the last value of a name wins
		"VIGIL_DEMO_API_PORT="+strconv.Itoa(api),
		"VIGIL_DEMO_GATEWAY_PORT="+strconv.Itoa(free[0]),
		"VIGIL_DEMO_DNSPUP_PORT="+strconv.Itoa(free[1]),
		"VIGIL_DEMO_PROXY_PORT="+strconv.Itoa(free[2]),
		fmt.Sprintf("VIGIL_DEMO_ORIGIN_PORTS=%d,%d,%d", free[3], free[4], free[5]),
		"VIGIL_DEMO_DATA_DIR="+data,
		"VIGIL_DEMO_BIN="+bin,
	)
	return env
}

// runDemo runs examples/demo.sh (stdin not a terminal) with env and returns
// its output, its error and how long it ran; deadline bounds it.
func runDemo(t *testing.T, env []string, deadline time.Duration) (string, time.Duration, error) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group: on the deadline everything the demo started
	// goes too, and afterwards the test can see that nothing is left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err = cmd.Wait()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("examples/demo.sh was still running after %s; its output:\n%s", deadline, out.String())
	}
	waitFor(t, "the demo's processes to be gone", 5*time.Second, func() bool {
		return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	})
	return out.String(), took, err
}

// TestDemoFailsFastOnATakenPort runs `make demo`'s script with the agent's
// API port taken: it must stop at once, name the port and the variable that
// moves it, and (with its own check off) name the agent that died and show
// the agent's log; and leave no process behind.
func TestDemoFailsFastOnATakenPort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs examples/demo.sh and the real binaries")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("examples/demo.sh needs %s: %v", tool, err)
		}
	}
	bin := demoBinaries(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	api := taken.Addr().(*net.TCPAddr).Port
	hint := fmt.Sprintf("port %d (the agent's API) is already in use on 127.0.0.1", api)
	move := "move the demo off it: VIGIL_DEMO_API_PORT=<a free port> make demo"
	// A hang guard: the script stops at its first check; a demo that went
	// on would run until this deadline.
	deadline := hangGuard(20 * time.Second)

	t.Run("checked before starting", func(t *testing.T) {
		data := t.TempDir()
		env := append(demoEnv(t, bin, data, api), "VIGIL_DEMO_PORT_CHECK=1")
		out, took, err := runDemo(t, env, deadline)
		t.Logf("examples/demo.sh failed after %s", took.Round(time.Millisecond))
		if err == nil {
			t.Fatalf("examples/demo.sh succeeded with port %d taken; its output:\n%s", api, out)
		}
		for _, want := range []string{hint, move} {
			if !strings.Contains(out, want) {
				t.Errorf("the output does not say %q; it is:\n%s", want, out)
			}
		}
		if _, err := os.Stat(filepath.Join(data, "demo-logs")); err == nil {
			t.Errorf("the demo started processes (it wrote %s/demo-logs) although a port was taken", data)
		}
	})

	t.Run("the agent dies", func(t *testing.T) {
		data := t.TempDir()
		env := append(demoEnv(t, bin, data, api), "VIGIL_DEMO_PORT_CHECK=0")
		out, took, err := runDemo(t, env, deadline)
		t.Logf("examples/demo.sh failed after %s", took.Round(time.Millisecond))
		if err == nil {
			t.Fatalf("examples/demo.sh succeeded with port %d taken; its output:\n%s", api, out)
		}
		config := filepath.Join(data, "demo", "quickstart.hcl")
		died := regexp.MustCompile(`demo: the agent \(vigil agent -config ` + regexp.QuoteMeta(config) + `\) exited \(status [1-9][0-9]*, pid [0-9]+\); the last 20 lines of ` +
			regexp.QuoteMeta(filepath.Join(data, "demo-logs", "agent.log")))
		if !died.MatchString(out) {
			t.Errorf("the output does not name the agent as the process that died; it is:\n%s", out)
		}
		// The demo quotes the agent's log: its last line is the error.
		agentLog, err := os.ReadFile(filepath.Join(data, "demo-logs", "agent.log"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(agentLog)), "\n")
		last := lines[len(lines)-1]
		if want := fmt.Sprintf("127.0.0.1:%d: bind: address already in use", api); !strings.Contains(last, want) {
			t.Errorf("the agent's log does not end with %q:\n%s", want, agentLog)
		}
		if !strings.Contains(out, "  | "+last+"\n") {
			t.Errorf("the output does not quote the agent's log line %q; it is:\n%s", last, out)
		}
		if !strings.Contains(out, move) {
			t.Errorf("the output does not say %q; it is:\n%s", move, out)
		}
		// The agent ran on the derived configuration, with the moved ports
		// and the test's binaries as its plugins.
		cfg, err := os.ReadFile(config)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			fmt.Sprintf("listen    = %q", "127.0.0.1:"+strconv.Itoa(api)),
			fmt.Sprintf("plugin_dir      = %q", bin),
			fmt.Sprintf("data_dir        = %q", filepath.Join(data, "quickstart")),
		} {
			if !strings.Contains(string(cfg), want) {
				t.Errorf("%s does not have %s:\n%s", config, want, cfg)
			}
		}
	})
}
