package probe_test

import (
	"testing"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/probe"
)

// TestVoteReason: each probe reason is the sdk.Reason of its name, and an
// unknown one is sdk.ReasonError.
func TestVoteReason(t *testing.T) {
	for r, want := range map[probe.Reason]sdk.Reason{
		probe.OK: sdk.ReasonOK, probe.HTTP5xx: sdk.ReasonHTTP5xx, probe.ConnectFailed: sdk.ReasonConnectFailed,
		probe.TLSFailed: sdk.ReasonTLSFailed, probe.Timeout: sdk.ReasonTimeout, probe.UnexpectedStatus: sdk.ReasonUnexpectedStatus,
		probe.BodyMismatch: sdk.ReasonBodyMismatch, probe.TooSlow: sdk.ReasonTooSlow, probe.OffHostRedirect: sdk.ReasonOffHostRedirect,
		probe.TooManyRedirects: sdk.ReasonTooManyRedirects, "from_a_newer_sdk": sdk.ReasonError,
	} {
		t.Run(string(r), func(t *testing.T) {
			if got := r.VoteReason(); got != want {
				t.Errorf("%q.VoteReason() = %v, want %v", r, got, want)
			}
		})
	}
}
