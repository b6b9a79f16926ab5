package nodeagent

import (
	"strings"
	"testing"
)

// TestMaxInFlight: every job of a batch may be in flight, up to
// -concurrency and what the open-file limit leaves (half of it beside the
// proxy).
func TestMaxInFlight(t *testing.T) {
	tests := []struct {
		name             string
		concurrency, fds int
		proxy            bool
		want             int
	}{
		{"default", 0, 0, false, DefaultConcurrency},
		{"default within a high limit", 0, 1 << 20, false, DefaultConcurrency},
		{"configured", 300, 20000, false, 300},
		{"lowered to the open-file limit", 5000, 1024, false, 1024 - fdReserve},
		{"default lowered to the open-file limit", 0, 1024, false, 1024 - fdReserve},
		{"half of it beside the proxy", 0, 1024, true, (1024 - fdReserve) / 2},
		{"never below one", 10, 10, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maxInFlight(tt.concurrency, tt.fds, tt.proxy); got != tt.want {
				t.Errorf("maxInFlight(%d, %d, %v) = %d, want %d", tt.concurrency, tt.fds, tt.proxy, got, tt.want)
			}
		})
	}
	saved := fdLimit
	t.Cleanup(func() { fdLimit = saved })
	fdLimit = func() int { return 512 }
	a, err := New(Config{Gateway: "127.0.0.1:1", ID: "edge-1", Token: "t", Concurrency: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.MaxInFlight(); got != 512-fdReserve {
		t.Errorf("MaxInFlight with a 512 open-file limit = %d, want %d", got, 512-fdReserve)
	}
}

func TestConfigLimits(t *testing.T) {
	base := Config{Gateway: "127.0.0.1:1", ID: "edge-1", Token: "t"}
	tests := []struct {
		name        string
		concurrency int
		spread      float64
		want        string // "" = accepted
	}{
		{"defaults", 0, 0, ""},
		{"no spread", 10, NoSpread, ""},
		{"half", 10, MaxSpread, ""},
		{"negative concurrency", -1, 0, "-concurrency -1: use a whole number from 1 to"},
		{"huge concurrency", MaxConcurrency + 1, 0, "-concurrency"},
		{"spread above half", 0, 0.6, "-spread 0.6: use a fraction from 0"},
		{"negative spread", 0, -0.2, "-spread -0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.Concurrency, cfg.Spread = tt.concurrency, tt.spread
			a, err := New(cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New = %v, want an error with %q", err, tt.want)
			case tt.want == "" && tt.spread == 0 && a.cfg.Spread != DefaultSpread:
				t.Errorf("spread %v, want the default %v", a.cfg.Spread, DefaultSpread)
			}
		})
	}
}
