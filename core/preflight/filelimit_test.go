package preflight_test

import (
	"testing"

	"github.com/vigilcdn/vigil/core/preflight"
	"github.com/vigilcdn/vigil/plugins/direct"
)

// TestDirectFiguresMirrorThePlugin: the figures FileLimitOf assumes of
// the direct plugin are the plugin's own.
func TestDirectFiguresMirrorThePlugin(t *testing.T) {
	if preflight.DirectMaxConcurrency != direct.DefaultMaxConcurrency {
		t.Errorf("DirectMaxConcurrency %d, the plugin's DefaultMaxConcurrency %d", preflight.DirectMaxConcurrency, direct.DefaultMaxConcurrency)
	}
}
