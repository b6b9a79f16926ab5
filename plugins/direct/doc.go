// Package direct is vigil's own vote source: the control plane probes each
// origin itself with sdk/probe and casts one vote per origin, as voter
// "direct". Probes run concurrently, at most `concurrency` at a time (64 by
// default). The binary is cmd/vigil-source-direct.
//
// Configuration (the source's `config { }` block, all optional):
//
//	config {
//	  concurrency = 64        # probes in flight at once, 1..10000
//	  voter       = "direct"  # voter id of the votes
//	}
//
// A target whose probe cannot run (an invalid address, or the round's
// deadline reached before its turn) gets no vote: the source abstains on it.
// The source stops starting probes shortly before the call's deadline so that
// the votes it has are still delivered.
package direct
