package sdk

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestReasonNamesRoundTrip(t *testing.T) {
	for r := ReasonUnspecified; r <= ReasonError; r++ {
		got, ok := ParseReason(r.String())
		if !ok || got != r {
			t.Errorf("ParseReason(%q) = %v, %v", r.String(), got, ok)
		}
	}
	if Reason(99).String() != "unspecified" {
		t.Errorf("unknown reason prints %q", Reason(99).String())
	}
}

func TestValidVoter(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"direct", true}, {"node-1.fra:a@b/c_d", true}, {"", false}, {"a b", false}, {"é", false},
		{string(make([]byte, 129)), false},
	} {
		if got := ValidVoter(tc.id); got != tc.ok {
			t.Errorf("ValidVoter(%q) = %v", tc.id, got)
		}
	}
}

func TestConfigGetters(t *testing.T) {
	c := Config{Values: map[string]any{"s": "x", "n": 2.5, "b": true, "l": []string{"a"}, "d": time.Second}}
	if v, ok := c.String("s"); !ok || v != "x" {
		t.Error("String")
	}
	if v, ok := c.Int("n"); !ok || v != 2 {
		t.Error("Int")
	}
	if v, ok := c.Bool("b"); !ok || !v {
		t.Error("Bool")
	}
	if v, ok := c.Strings("l"); !ok || len(v) != 1 {
		t.Error("Strings")
	}
	if v, ok := c.Duration("d"); !ok || v != time.Second {
		t.Error("Duration")
	}
	if _, ok := c.String("missing"); ok {
		t.Error("missing attribute reported set")
	}
	if _, ok := c.String("n"); ok {
		t.Error("number read as string")
	}
}

func TestDiagnosticsErr(t *testing.T) {
	var none Diagnostics
	if none.Err() != nil {
		t.Error("empty Diagnostics.Err() is not nil")
	}
	err := fmt.Errorf("wrapped: %w", Diagnostics{AttributeError("a", "Bad", "fix it"), ElementError("l", 2, "Worse", "")})
	var ds Diagnostics
	if !errors.As(err, &ds) || ds[1].AttributePath != "l[2]" {
		t.Fatalf("errors.As = %v", ds)
	}
	if got, want := ds.Error(), "a: Bad: fix it\nl[2]: Worse"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestWatchParentExitsWhenParentChanges(t *testing.T) {
	exited := make(chan struct{})
	// A ppid that is not ours: the watcher must notice on its first tick.
	watchParent(hclog.NewNullLogger(), -1+1<<30, time.Millisecond, func() { close(exited) })
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("watchParent did not call exit")
	}
}
