package dns

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/vigilcdn/vigil/core/publish"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// BenchmarkQueriesDuringSwitches measures queries per second on loopback
// while a goroutine publishes a new snapshot of 1000 sites every
// switchEvery (100 switches a second, far more than a real fleet makes),
// each one flipping every site between two levels. 16 clients per CPU
// each keep one socket, so the figure is throughput, not round-trip time.
func BenchmarkQueriesDuringSwitches(b *testing.B) {
	for _, network := range []string{"udp", "tcp"} {
		b.Run(network, func(b *testing.B) {
			hub := publish.NewHub()
			hub.Publish(switched(1, 1000))
			s := start(b, newConfig(false), hub)

			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var switches int
			wg.Go(func() {
				tick := time.NewTicker(switchEvery)
				defer tick.Stop()
				for v := uint64(2); ; v++ {
					select {
					case <-ctx.Done():
						switches = int(v - 2)
						return
					case <-tick.C:
						hub.Publish(switched(v, 1000))
					}
				}
			})
			b.Cleanup(func() { cancel(); wg.Wait() })

			b.SetParallelism(16)
			begin := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := &dns.Client{Net: network, Timeout: 5 * time.Second}
				conn, err := c.Dial(s.Addr())
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				m := new(dns.Msg)
				m.SetQuestion("s7.cdn.example.net.", dns.TypeA)
				for pb.Next() {
					m.Id = dns.Id()
					if err := conn.WriteMsg(m); err != nil {
						b.Error(err)
						return
					}
					r, err := conn.ReadMsg()
					if err != nil {
						b.Error(err)
						return
					}
					if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
						b.Errorf("answer %v", r)
						return
					}
				}
			})
			elapsed := time.Since(begin)
			b.StopTimer()
			cancel()
			wg.Wait()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "q/s")
			b.ReportMetric(float64(switches)/elapsed.Seconds(), "switches/s")
		})
	}
}

const switchEvery = 10 * time.Millisecond

// switched is bigSnapshot with every site's level flipping with the
// version parity: level 1 and level 2 have different addresses.
func switched(version uint64, n int) *publication.Snapshot {
	snap := bigSnapshot(version, n)
	if version%2 == 0 {
		for i := range snap.Sites {
			snap.Sites[i].Level = 2
			snap.Sites[i].Origins[0].Address = "https://192.0.2.1"
			snap.Sites[i].Origins[1].Address = "https://192.0.2.2"
		}
	}
	return snap
}

// BenchmarkSwitchToAnswer measures how long a switch takes from Publish to
// the first answer that shows it, on loopback over UDP, a query at a time
// (ms/switch): what TestSwitchReflected once asserted under 100 ms.
func BenchmarkSwitchToAnswer(b *testing.B) {
	s, hub := startWith(b, false, fixture(7))
	c := &dns.Client{Timeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion("www.cdn.example.net.", dns.TypeA)
	addrs := []string{"192.0.2.1", "192.0.2.2"}
	var total time.Duration
	version := uint64(8)
	for i := 0; b.Loop(); i++ {
		snap := fixture(version)
		version++
		snap.Sites[0].Level = 2
		addr := addrs[i%2]
		snap.Sites[0].Origins = []publication.Origin{orig("backup", "https://"+addr, "healthy")}
		published := time.Now()
		hub.Publish(snap)
		for {
			r, _, err := c.Exchange(m, s.Addr())
			if err != nil {
				b.Fatal(err)
			}
			if got := rdata(r.Answer); len(got) == 1 && got[0] == "A "+addr {
				break
			}
		}
		total += time.Since(published)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/switch")
}
