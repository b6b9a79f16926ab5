package sdktest

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func TestLogBufferWaitFor(t *testing.T) {
	var b LogBuffer
	go func() {
		for i := range 5 {
			fmt.Fprintf(&b, "line %d of the log\n", i)
		}
		fmt.Fprintln(&b, "plugin started addr=127.0.0.1:1")
	}()
	if got := b.WaitFor(t, 5*time.Second, "plugin started", "addr="); got != "plugin started addr=127.0.0.1:1" {
		t.Fatalf("WaitFor returned %q", got)
	}

	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.WaitFor(ft, 20*time.Millisecond, "never written")
	}()
	<-done
	if !ft.failed {
		t.Fatal("WaitFor for a line never written did not fail the test")
	}
}

// fatalRecorder records a Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	runtime.Goexit()
}
