package probe

import "github.com/vigilcdn/vigil/sdk"

// VoteReason is the vote's reason for r: the [sdk.Reason] of the same
// name (OK is sdk.ReasonOK, HTTP5xx sdk.ReasonHTTP5xx, ...), and
// sdk.ReasonError for a reason this SDK does not know. Every Reason of
// this package has its sdk.Reason.
func (r Reason) VoteReason() sdk.Reason {
	if v, ok := sdk.ParseReason(string(r)); ok {
		return v
	}
	return sdk.ReasonError
}
