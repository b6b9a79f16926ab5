package pluginhost

import (
	"context"
	"testing"
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
