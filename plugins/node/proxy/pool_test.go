package proxy

import (
	"net"
	"testing"
	"time"
)

// closeCounter is a net.Conn that counts its Close calls.
type closeCounter struct {
	net.Conn
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestUpstreamTakesItsLoopsOwnFirst: the pool hands a loop its own idle
// connections newest first, another loop's only once they have waited
// stealAfter (oldest first), and closes what has waited idleConnTimeout.
func TestUpstreamTakesItsLoopsOwnFirst(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	type idle struct {
		loop int
		age  time.Duration
	}
	for _, tc := range []struct {
		name   string
		idle   []idle // put in this order
		own    int
		want   int // index into idle of the one taken, -1: none (dial)
		closed []int
	}{
		{name: "own newest", idle: []idle{{1, 3 * time.Second}, {2, 5 * time.Second}, {1, time.Millisecond}}, own: 1, want: 2},
		{name: "none of its own, the other's too fresh", idle: []idle{{2, 10 * time.Millisecond}, {2, 500 * time.Millisecond}}, own: 1, want: -1},
		{name: "another's oldest once spare", idle: []idle{{2, 2 * time.Second}, {2, 10 * time.Millisecond}}, own: 1, want: 0},
		{name: "a goroutine takes a loop's spare one", idle: []idle{{1, 2 * time.Second}}, own: 0, want: 0},
		{name: "a loop takes the goroutines' spare one", idle: []idle{{0, 2 * time.Second}}, own: 2, want: 0},
		{name: "expired own ones closed, then a spare", idle: []idle{{2, time.Minute}, {1, 2 * idleConnTimeout}, {1, idleConnTimeout}}, own: 1, want: 0, closed: []int{1, 2}},
		{name: "expired spare one closed", idle: []idle{{2, 2 * idleConnTimeout}, {2, time.Millisecond}}, own: 1, want: -1, closed: []int{0}},
		{name: "empty", own: 1, want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &upstream{}
			var conns []*closeCounter
			var ucs []*upConn
			for _, i := range tc.idle {
				c := &closeCounter{}
				uc := &upConn{c: c, idleAt: now.Add(-i.age)}
				for len(u.idle) <= i.loop {
					u.idle = append(u.idle, nil)
				}
				u.idle[i.loop] = append(u.idle[i.loop], uc)
				u.nidle++
				conns, ucs = append(conns, c), append(ucs, uc)
			}
			got := u.takeLocked(tc.own, now)
			switch {
			case tc.want < 0 && got != nil:
				t.Fatalf("took %v, want none", got.idleAt)
			case tc.want >= 0 && got != ucs[tc.want]:
				t.Fatalf("took %v, want the one idle since %v", got, ucs[tc.want].idleAt)
			}
			closed := map[int]bool{}
			for _, i := range tc.closed {
				closed[i] = true
			}
			left := 0
			for i, c := range conns {
				if want := map[bool]int{true: 1}[closed[i]]; c.closed != want {
					t.Errorf("connection %d closed %d times, want %d", i, c.closed, want)
				}
				if !closed[i] && i != tc.want {
					left++
				}
			}
			n := 0
			for _, s := range u.idle {
				n += len(s)
			}
			if n != left || u.nidle != left {
				t.Errorf("%d idle left (nidle %d), want %d", n, u.nidle, left)
			}
		})
	}
}
