package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestServerStreams: an event stream is passed on as the origin writes it
// (ReverseProxy flushes text/event-stream at once): the visitor reads the
// first event while the origin still holds the response open.
func TestServerStreams(t *testing.T) {
	release := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "data: last\n\n")
	}))
	t.Cleanup(origin.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	h := newHarness(t, Options{}, snapshot(publication.Origin{Name: "a1", Address: origin.URL, State: "healthy"}))
	req, _ := http.NewRequest(http.MethodGet, h.url+"/events", nil)
	req.Host = "www.example.com"
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: last") {
		t.Fatalf("the rest of the stream: %q", rest)
	}
}

// TestServerVisitorLeaves: a visitor that gives up on a request whose
// origin hangs ends the attempt; it is neither reported to OnAttempt nor
// counted as the origin's failure, and nothing is retried.
func TestServerVisitorLeaves(t *testing.T) {
	arrived := make(chan struct{}, 4)
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(hanging.Close)
	good := newBackend(t, "good", 200)
	var reported atomic.Int64
	// The first request of a fresh proxy starts at index 1: the hanging one.
	h := newHarness(t, Options{OnAttempt: func(Attempt) { reported.Add(1) }}, snapshot(
		publication.Origin{Name: "good", Address: good.srv.URL, State: "healthy"},
		publication.Origin{Name: "hang", Address: hanging.URL, State: "healthy"}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/page", nil)
	req.Host = "www.example.com"
	done := make(chan error, 1)
	go func() {
		resp, err := h.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the hanging origin")
	}
	cancel()
	<-done
	// The proxy notices when the connection closes; a request on a new
	// connection afterwards is served by the other origin, and by then the
	// first one's attempt has ended (the proxy serves it to its end first).
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, h.p.m.requests.WithLabelValues("www", "4xx")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned request never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := reported.Load(); n != 0 {
		t.Errorf("%d attempts reported for a request the visitor gave up on", n)
	}
	if v := counter(t, h.p.m.originErrors.WithLabelValues("www", "hang", "timeout")) + counter(t, h.p.m.originErrors.WithLabelValues("www", "hang", "connect_error")); v != 0 {
		t.Errorf("the abandoned attempt counted as %v failures of the origin", v)
	}
	if good.hits.Load() != 0 || counter(t, h.p.m.retries.WithLabelValues("www")) != 0 {
		t.Errorf("retried after the visitor left: good %d hits", good.hits.Load())
	}
}
