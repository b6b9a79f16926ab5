package schedule_test

import (
	"slices"
	"testing"

	"github.com/vigilcdn/vigil/core/schedule"
)

func TestPick(t *testing.T) {
	sites := []schedule.Site{
		{Name: "c", LastProbed: 0, Eligible: true},
		{Name: "a", LastProbed: 3, Eligible: true},
		{Name: "b", LastProbed: 0, Eligible: true},
		{Name: "d", LastProbed: 1, Eligible: false},
		{Name: "e", LastProbed: 2, Eligible: true},
	}
	tests := []struct {
		name string
		n    int
		want []string
	}{
		{"never probed first, ties by name", 2, []string{"b", "c"}},
		{"then longest ago", 3, []string{"b", "c", "e"}},
		{"ineligible never picked", 10, []string{"b", "c", "e", "a"}},
		{"zero", 0, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p schedule.Picker
			got := []string{}
			for _, i := range p.Pick(sites, tt.n) {
				got = append(got, sites[i].Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Pick = %v, want %v", got, tt.want)
			}
		})
	}
}
