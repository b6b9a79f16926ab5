package labels

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "", want: ""},
		{in: "region=eu", want: "region=eu"},
		{in: " tier = edge , region=eu ", want: "region=eu,tier=edge"},
		{in: "k=", want: "k="},
		{in: "region", wantErr: "write it as key=value"},
		{in: "=eu", wantErr: "use 1 to 63"},
		{in: "a=1,a=2", wantErr: "given twice"},
		{in: "a b=1", wantErr: "only letters"},
		{in: "a=x y", wantErr: "only letters"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Errorf("Parse(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSiteSelector(t *testing.T) {
	tests := []struct {
		in, site, sel, wantErr string
		node                   map[string]string
		match                  bool
	}{
		{in: "www: region=eu", site: "www", sel: "region=eu", node: map[string]string{"region": "eu", "x": "y"}, match: true},
		{in: "www:region=eu,tier=edge", site: "www", sel: "region=eu,tier=edge", node: map[string]string{"region": "eu"}, match: false},
		{in: "www: region=eu", site: "www", sel: "region=eu", node: map[string]string{"region": "us"}, match: false},
		{in: "www", wantErr: "SITE: key=value"},
		{in: ": a=b", wantErr: "SITE: key=value"},
		{in: "www:", wantErr: "no labels"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			site, sel, err := ParseSiteSelector(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if site != tt.site || sel.String() != tt.sel {
				t.Errorf("got %q %q, want %q %q", site, sel, tt.site, tt.sel)
			}
			if got := sel.Matches(tt.node); got != tt.match {
				t.Errorf("Matches(%v) = %v, want %v", tt.node, got, tt.match)
			}
		})
	}
}

// FuzzParse checks that whatever Parse accepts passes Check and survives a
// round trip through String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "a=b", "region=eu,tier=edge", "a=", "a=b,a=c", " x = y ", "k/v.w=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			return
		}
		if err := Check(set); err != nil {
			t.Fatalf("Parse(%q) accepted a set Check refuses: %v", s, err)
		}
		again, err := Parse(set.String())
		if err != nil || again.String() != set.String() {
			t.Fatalf("round trip of %q: %q, %v", s, set.String(), err)
		}
		_, _, _ = ParseSiteSelector(s)
	})
}
