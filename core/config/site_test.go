package config

import (
	"strings"
	"testing"
)

// TestCheckName: the names every interface can carry pass; the others
// are refused with the rule in the message.
func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"www", true},
		{"shop-eu.2", true},
		{"A_b", true},
		{"s000001", true},
		{"1st", true},
		{strings.Repeat("a", MaxNameLength), true},
		{"", false},
		{strings.Repeat("a", MaxNameLength+1), false},
		{".hidden", false},
		{"..", false},
		{"-x", false},
		{"_x", false},
		{"a/b", false},
		{"../../etc/cron.d/x", false},
		{"shop eu", false},
		{"a\nb", false},
		{"café", false},
		{"a%2Fb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkName("site", tt.name)
			if (err == nil) != tt.ok {
				t.Fatalf("checkName(%q) = %v, want ok %v", tt.name, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "beginning with a letter or a digit") {
				t.Fatalf("the error does not say the rule: %v", err)
			}
		})
	}
}
