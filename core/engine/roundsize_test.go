package engine_test

import (
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
	"github.com/vigilcdn/vigil/core/engine"
)

func TestAutoRoundSize(t *testing.T) {
	s := time.Second
	budget := config.ChainBudget(30 * s) // 28s
	type r = engine.RoundSample
	five := func(first r, rest r) []r { return []r{first, rest, rest, rest, rest, rest} }
	for _, tt := range []struct {
		name     string
		recent   []r
		eligible int
		want     int
	}{
		{"no round yet: the floor", nil, 10000, 500},
		{"no round yet, fewer eligible: all of them", nil, 300, 300},
		{"no eligible site", []r{{Sites: 500, Duration: s}}, 0, 0},
		// Issue 33: 500 sites of 750 black-holed took 7.8 s of 28 s;
		// the next round takes every site (1,345 would fit, twice 500
		// is allowed).
		{"the issue's round: the whole fleet next", []r{{Sites: 500, Duration: 7800 * time.Millisecond}}, 750, 750},
		{"grows at most twice the last round", []r{{Sites: 500, Duration: s}}, 100000, 1000},
		{"the rate binds: 3/4 of what fits", []r{{Sites: 2000, Duration: 20 * s}}, 100000, 2100},
		// 5,000 sites in 90 s: 1,555 fit in 28 s, 3/4 of it 1,166; the
		// last round alone (1,000 in 10 s) would allow 2,000.
		{"the rate is the window's", []r{{1000, 20 * s, false}, {1000, 20 * s, false}, {1000, 20 * s, false}, {1000, 20 * s, false}, {1000, 10 * s, false}}, 100000, 1166},
		// Only the last five: 5,000 in 70 s, 2,000 fit, 1,500; with the
		// oldest one it would be 1,104.
		{"older rounds are forgotten", five(r{Sites: 100, Duration: 27 * s}, r{Sites: 1000, Duration: 14 * s}), 100000, 1500},
		// Late: 2,000 in 40 s, 1,400 fit in 28 s: 1,050, whatever the
		// faster round before it.
		{"a late round shrinks at once", []r{{Sites: 2000, Duration: 10 * s}, {Sites: 2000, Duration: 40 * s}}, 100000, 1050},
		{"a black-hole storm shrinks to the floor", []r{{Sites: 3000, Duration: 5 * s}, {Sites: 3000, Duration: 280 * s}}, 100000, 500},
		// In time but a source was cut: 3/4 of its sites, though the
		// rate would allow 2,100.
		{"a source out of time shrinks by a quarter", []r{{Sites: 2000, Duration: 20 * s, OutOfTime: true}}, 100000, 1500},
		{"never below the floor", []r{{Sites: 500, Duration: 25 * s}}, 100000, 500},
		{"never above the eligible sites", []r{{Sites: 4000, Duration: s}}, 5000, 5000},
		{"no measurable time: twice the last round", []r{{Sites: 600, Duration: 0}}, 100000, 1200},
		{"a tiny duration does not overflow", []r{{Sites: 1 << 30, Duration: time.Nanosecond}}, 1 << 40, 1 << 31},
		{"a fleet that grew starts from what was probed", []r{{Sites: 300, Duration: 100 * time.Millisecond}}, 100000, 600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := engine.AutoRoundSize(tt.recent, budget, tt.eligible); got != tt.want {
				t.Fatalf("AutoRoundSize = %d, want %d", got, tt.want)
			}
		})
	}
}
