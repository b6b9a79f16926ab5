//go:build faultinject

package main

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/core/engine"
)

// faultHooks, in a binary built with -tags faultinject, kills the agent
// with SIGKILL inside the window VIGIL_FAULT names, at the Nth commit:
//
//	VIGIL_FAULT=before-commit:N   the batch is ready, nothing saved
//	VIGIL_FAULT=after-commit:N    saved, nothing published or answered
//
// The crash tests use it to hit those windows every time, not by luck.
func faultHooks(log hclog.Logger) *engine.Hooks {
	spec := os.Getenv("VIGIL_FAULT")
	if spec == "" {
		return nil
	}
	where, nth, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(nth)
	if err != nil || n < 1 {
		n = 1
	}
	var count atomic.Int64
	kill := func() {
		if count.Add(1) == int64(n) {
			log.Warn("fault injection: killing the agent now", "window", where, "commit", n)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	h := &engine.Hooks{}
	switch where {
	case "before-commit":
		h.BeforeCommit = kill
	case "after-commit":
		h.AfterCommit = kill
	default:
		log.Error("VIGIL_FAULT names no window; want before-commit:N or after-commit:N", "value", spec)
		return nil
	}
	return h
}
