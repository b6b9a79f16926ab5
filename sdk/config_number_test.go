package sdk_test

import (
	"testing"

	"github.com/vigilcdn/vigil/sdk"
)

// TestConfigNumberTypes: a number reads the same whether the host sent it
// (float64) or a test wrote a Go integer into the map by hand.
func TestConfigNumberTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want float64
		ok   bool
	}{
		{"float64", float64(2.5), 2.5, true},
		{"int", 3, 3, true},
		{"int64", int64(-4), -4, true},
		{"uint8", uint8(7), 7, true},
		{"float32", float32(1.5), 1.5, true},
		{"string", "3", 0, false},
		{"bool", true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sdk.Config{Values: map[string]any{"n": tc.v}}
			got, ok := c.Number("n")
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Number(%v) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
			}
			i, iok := c.Int("n")
			if i != int(tc.want) || iok != tc.ok {
				t.Fatalf("Int(%v) = %v, %v; want %v, %v", tc.v, i, iok, int(tc.want), tc.ok)
			}
		})
	}
	if _, ok := (sdk.Config{}).Number("missing"); ok {
		t.Fatal("a missing attribute reads as set")
	}
}
