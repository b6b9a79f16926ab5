package xds_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/plugins/node/xds"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// BenchmarkSwitch measures, through grpc-go's xDS client on loopback,
// the time from the Server's Apply of a level switch to the first call
// that lands on the new level (one call in flight at a time), failovers
// and failbacks in turn. It reports the median and the largest switch
// (ms_p50, ms_max) and the calls that failed meanwhile (failed_calls).
func BenchmarkSwitch(b *testing.B) {
	srv, err := xds.New(xds.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Watch(ctx, nil); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	addr := map[int]string{1: backend(b), 2: backend(b)}
	view := func(version uint64, level int) *edge.View {
		v, _ := edge.Build(&publication.Snapshot{Version: version, Sites: []publication.Site{{Name: "img", Hostname: "img.example.org", Level: level,
			Origins: []publication.Origin{{Name: "o", Address: "http://" + addr[level], State: "healthy"}}}}}, nil, "", nil)
		return v
	}
	conn := xdsClient(b, srv.Addr().String())
	health := healthpb.NewHealthClient(conn)
	call := func() (string, error) {
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		var p peer.Peer
		_, err := health.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
		if err != nil {
			return "", err
		}
		return p.Addr.String(), nil
	}
	version := uint64(1)
	if _, err := srv.Apply(ctx, view(version, 1)); err != nil {
		b.Fatal(err)
	}
	for {
		if got, _ := call(); got == addr[1] {
			break
		}
	}
	var took []time.Duration
	failed := 0
	b.ResetTimer()
	for i := range b.N {
		level := 2 - i%2
		version++
		start := time.Now()
		if _, err := srv.Apply(ctx, view(version, level)); err != nil {
			b.Fatal(err)
		}
		deadline := start.Add(2 * time.Minute)
		for {
			got, err := call()
			if err != nil {
				failed++
			}
			if got == addr[level] {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("no call landed on level %d", level)
			}
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms_p50")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "ms_max")
	b.ReportMetric(float64(failed), "failed_calls")
}
