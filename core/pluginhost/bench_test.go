package pluginhost

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilcdn/vigil/sdk"
)

// BenchmarkVote10k measures one Vote round trip of a 10,000-target ballot
// through a real plugin process: conversion, protobuf, gRPC over AutoMTLS,
// the plugin's trivial answer and the host's vote validation. ns/target is
// the per-target overhead (target: under 5000).
func BenchmarkVote10k(b *testing.B) {
	const targets = 10000
	src := New(Spec{Name: "bench", Plugin: testPlugin, Config: parseConfig(b, `voter = "v"`)})
	b.Cleanup(src.Close)
	if diags := src.Start(context.Background()); diags.HasErrors() {
		b.Fatal(diags)
	}
	ballot := ballot("bench", targets)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		votes, err := src.Vote(ctx, ballot)
		if err != nil || len(votes) != targets {
			b.Fatalf("Vote: %d votes, %v", len(votes), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/targets, "ns/target")
}

// BenchmarkErrorRound measures a round of a plugin that answers an error
// status: RESOURCE_EXHAUSTED costs one call, the plugin kept; UNAVAILABLE
// costs the call, the kill and a fresh start of the process (the backoff
// is off, as if every round found the plugin down anew). restarts/op
// counts the starts.
func BenchmarkErrorRound(b *testing.B) {
	for _, mode := range []string{"exhausted", "unavailable"} {
		b.Run(mode, func(b *testing.B) {
			src := New(Spec{Name: "bench", Plugin: testPlugin, Config: parseConfig(b, `voter = "v"`)})
			b.Cleanup(src.Close)
			if diags := src.Start(context.Background()); diags.HasErrors() {
				b.Fatal(diags)
			}
			ballot := ballot(mode, 1)
			ctx := context.Background()
			for b.Loop() {
				if _, err := src.Vote(ctx, ballot); err == nil {
					b.Fatal("Vote succeeded")
				}
				src.mu.Lock()
				src.retryAt = time.Time{} // no backoff: measure the restart itself
				src.mu.Unlock()
				if mode == "unavailable" {
					if _, err := src.Vote(ctx, sdk.Ballot{Round: 1}); err != nil {
						b.Fatalf("Vote after the crash: %v", err)
					}
				}
			}
			b.ReportMetric(float64(src.Stats().Restarts)/float64(b.N), "restarts/op")
		})
	}
}

// BenchmarkGate10k measures the host's capability check of a
// 10,000-target ballot, every target behind a private CA (the costlier
// case: each address is parsed), side by side: a plugin that declares
// tls.ca_bundle (every target kept) and one that does not (every target
// held back, with an abstention). ns/target is the check's own cost.
func BenchmarkGate10k(b *testing.B) {
	const targets = 10000
	bl := ballot("bench", targets)
	bl.CAs = map[string][]byte{"sha256:x": []byte("PEM")}
	for i := range bl.Targets {
		bl.Targets[i].TLS.CA = "sha256:x"
	}
	for _, tc := range []struct {
		name string
		info sdk.Info
	}{
		{"declared", sdk.Info{Name: "p", ProtocolVersion: 2, Capabilities: sdk.ProbeCapabilities()}},
		{"missing", sdk.Info{Name: "p", ProtocolVersion: 2}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				gate(tc.info, bl)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/targets, "ns/target")
		})
	}
}

// BenchmarkVoteLogFlood measures a round of a plugin that logs 20,000
// lines per Vote (mode logflood) beside a quiet one (mode quiet), through
// a real process whose log goes to a buffer at INFO. logged_lines/op and
// dropped_lines/op say what the host's rate limit kept and dropped.
func BenchmarkVoteLogFlood(b *testing.B) {
	for _, mode := range []string{"quiet", "logflood"} {
		b.Run(mode, func(b *testing.B) {
			var out countingWriter
			src := New(Spec{Name: "bench", Plugin: testPlugin, Config: parseConfig(b, `voter = "v"`),
				Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &out})})
			b.Cleanup(src.Close)
			if diags := src.Start(context.Background()); diags.HasErrors() {
				b.Fatal(diags)
			}
			ballot := ballot(mode, 1)
			ctx := context.Background()
			before, dropped0 := out.lines.Load(), src.Stats().DroppedLogLines
			for b.Loop() {
				if _, err := src.Vote(ctx, ballot); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.lines.Load()-before)/float64(b.N), "logged_lines/op")
			b.ReportMetric(float64(src.Stats().DroppedLogLines-dropped0)/float64(b.N), "dropped_lines/op")
		})
	}
}

// countingWriter counts the lines written to it.
type countingWriter struct{ lines atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}
