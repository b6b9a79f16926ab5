package probe_test

import (
	"testing"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// TestOneReasonType: a probe's reasons are sdk.Reason values, so a
// Result's Reason goes into a vote as it is, and each keeps the name it
// had as a string before SDK v0.3.0 (what logs, metrics labels and the
// node gateway's wire carry).
func TestOneReasonType(t *testing.T) {
	for _, tc := range []struct {
		got  sdk.Reason
		want sdk.Reason
		name string
	}{
		{probe.OK, sdk.ReasonOK, "ok"},
		{probe.HTTP5xx, sdk.ReasonHTTP5xx, "http_5xx"},
		{probe.ConnectFailed, sdk.ReasonConnectFailed, "connect_failed"},
		{probe.TLSFailed, sdk.ReasonTLSFailed, "tls_failed"},
		{probe.Timeout, sdk.ReasonTimeout, "timeout"},
		{probe.UnexpectedStatus, sdk.ReasonUnexpectedStatus, "unexpected_status"},
		{probe.BodyMismatch, sdk.ReasonBodyMismatch, "body_mismatch"},
		{probe.TooSlow, sdk.ReasonTooSlow, "too_slow"},
		{probe.OffHostRedirect, sdk.ReasonOffHostRedirect, "off_host_redirect"},
		{probe.TooManyRedirects, sdk.ReasonTooManyRedirects, "too_many_redirects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("probe reason %v is not sdk.Reason %v", tc.got, tc.want)
			}
			if tc.got.String() != tc.name {
				t.Errorf("String() = %q, want %q", tc.got.String(), tc.name)
			}
			if r, ok := sdk.ParseReason(tc.name); !ok || r != tc.got {
				t.Errorf("ParseReason(%q) = %v, %v", tc.name, r, ok)
			}
			v := sdk.Vote{Reason: probe.Result{Reason: tc.got}.Reason}
			if v.Reason != tc.want {
				t.Errorf("vote reason %v, want %v", v.Reason, tc.want)
			}
		})
	}
}
