package agent_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestStopEndsLongPolls: a node following the publication holds a long
// poll; Stop answers it (304, as at the end of its wait) and returns,
// rather than waiting out the poll or the shutdown's ten seconds. The
// waits below only catch a hang: a poll that Stop did not answer stays
// open for its 5 minutes (the shutdown's timeout does not close it), and
// one that the shutdown cut ends without a 304.
func TestStopEndsLongPolls(t *testing.T) {
	f, addr := start(t)
	hub := f.a.Engine().Hub()
	path := "/v1/publication?wait=5m&after=" + strconv.FormatUint(hub.Current().Version, 10)
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+addr+path, nil)
	polled := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- -1
			return
		}
		resp.Body.Close()
		polled <- resp.StatusCode
	}()
	deadline := time.After(time.Minute)
	for hub.Waiting() == 0 {
		select {
		case <-deadline:
			t.Fatal("the long poll never reached the hub")
		case <-time.After(5 * time.Millisecond):
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- f.a.Stop() }()
	select {
	case status := <-polled:
		if status != http.StatusNotModified {
			t.Errorf("the long poll ended with %d during Stop; want 304, its answer at the end of a wait", status)
		}
	case <-time.After(time.Minute):
		t.Fatal("the long poll was still open a minute after Stop began")
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Stop did not return within a minute of a long poll")
	}
}
