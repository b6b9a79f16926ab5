package probe

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDoBody checks that a probe judges the whole body, within the timeout
// and up to the cap, over HTTP/1.1 and HTTP/2.
func TestDoBody(t *testing.T) {
	ca := newTestCA(t)
	cert := leaf(t, ca, []string{siteHost}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	origins := []struct {
		name string
		o    *testOrigin
	}{
		{"HTTP/1.1", newOrigin(t, nil)},
		{"HTTP/2", newH2Origin(t, &cert)},
	}
	const short = 300 * time.Millisecond
	const anyBytes = -1
	cases := []struct {
		name      string
		req       Request
		want      want
		phase     Phase
		bodyBytes int64 // anyBytes: not checked
		detail    string
	}{
		{"headers then stall", Request{Path: "/stall", Timeout: short},
			want{false, Timeout, 200}, PhaseBody, 0, "timeout reading the body after 0 bytes (300ms)"},
		{"stall after the expected text", Request{Path: "/okstall", Timeout: short, ExpectedBody: "vigil-ok"},
			want{false, Timeout, 200}, PhaseBody, 8, "after 8 bytes"},
		{"slow drip outlasting the timeout", Request{Path: "/drip?n=100", Timeout: short},
			want{false, Timeout, 200}, PhaseBody, anyBytes, "timeout reading the body after"},
		{"slow drip within the timeout", Request{Path: "/drip?n=5"},
			want{true, OK, 200}, "", 5, "200"},
		{"endless fast body stops at the cap", Request{Path: "/endless"},
			want{true, OK, 200}, "", DefaultMaxBody, "200"},
		{"endless fast body, small cap", Request{Path: "/endless", MaxBody: 1000},
			want{true, OK, 200}, "", 1000, "200"},
		{"50 MB body stops at the cap", Request{Path: "/fifty"},
			want{true, OK, 200}, "", DefaultMaxBody, "200"},
		{"huge body, text in the prefix", Request{Path: "/huge", ExpectedBody: "vigil-head"},
			want{true, OK, 200}, "", DefaultMaxBody, "200"},
		{"huge body, text past the cap", Request{Path: "/huge", ExpectedBody: "vigil-tail"},
			want{false, BodyMismatch, 200}, PhaseBody, DefaultMaxBody, "first 1 MiB"},
		{"huge body, text within a larger cap", Request{Path: "/huge", ExpectedBody: "vigil-tail", MaxBody: 2 << 20},
			want{true, OK, 200}, "", 2 << 20, "200"},
		{"small body, text missing", Request{Path: "/health", ExpectedBody: "not-there"},
			want{false, BodyMismatch, 200}, PhaseBody, 19, "not in the body (19 bytes)"},
		{"truncated body", Request{Path: "/short"},
			want{false, ConnectFailed, 200}, PhaseBody, anyBytes, ""},
	}
	for _, oc := range origins {
		t.Run(oc.name, func(t *testing.T) {
			o := oc.o
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					req := tc.req
					req.Address, req.Host, req.RootCAs = o.url, siteHost, ca.pool
					got, err := Do(context.Background(), req)
					check(t, got, err, tc.want)
					if got.Phase != tc.phase || !strings.Contains(got.Detail, tc.detail) {
						t.Errorf("phase %q, detail %q; want %q, mentioning %q", got.Phase, got.Detail, tc.phase, tc.detail)
					}
					if tc.bodyBytes != anyBytes && got.BodyBytes != tc.bodyBytes {
						t.Errorf("read %d bytes of the body, want %d", got.BodyBytes, tc.bodyBytes)
					}
					maxBody := int64(DefaultMaxBody)
					if req.MaxBody > 0 {
						maxBody = req.MaxBody
					}
					if got.BodyBytes > maxBody {
						t.Errorf("read %d bytes, over the %d byte cap", got.BodyBytes, maxBody)
					}
					if got.Reason == Timeout && got.Duration < req.Timeout {
						t.Errorf("timed out after %v, before the %v timeout", got.Duration, req.Timeout)
					}
					switch path := strings.SplitN(req.Path, "?", 2)[0]; path {
					case "/drip":
						if got.Reason == Timeout && (got.BodyBytes == 0 || got.BodyBytes >= 100) {
							t.Errorf("read %d bytes of the drip, want some but not all", got.BodyBytes)
						}
					case "/endless":
						// The probe hung up: the origin's next write failed.
						select {
						case <-o.ended:
						case <-time.After(10 * time.Second):
							t.Fatal("the endless body is still being sent after Do returned")
						}
					case "/huge", "/fifty":
						full := int64(hugeBodyMax)
						if path == "/fifty" {
							full = fiftyMB
						}
						select {
						case n := <-o.bodySent:
							// Socket buffers and HTTP/2 flow control let the
							// origin write some megabytes past what the probe
							// read, never the whole body.
							if n >= full {
								t.Errorf("origin wrote the whole %d byte body: the read is not capped", n)
							}
							t.Logf("origin wrote %d bytes", n)
						case <-time.After(10 * time.Second):
							t.Fatal("the origin is still sending after Do returned")
						}
					}
				})
			}
		})
	}
}
