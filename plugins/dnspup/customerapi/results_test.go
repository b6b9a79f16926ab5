package customerapi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/dnspup/customerapi"
)

type cp struct {
	id      string
	outcome customerapi.Outcome
	status  int
	failure customerapi.Failure
	latency time.Duration
}

func flatten(rs []customerapi.CheckpointResult) []cp {
	var out []cp
	for _, r := range rs {
		out = append(out, cp{r.NodeID, r.Outcome, r.Status, r.Failure, r.Latency})
	}
	return out
}

func TestParseProbeResponse(t *testing.T) {
	up, down, none := customerapi.OutcomeUp, customerapi.OutcomeDown, customerapi.OutcomeNone
	ms := time.Millisecond
	tests := []struct {
		name string
		body string
		want []cp
	}{
		{"assumed shape", `{"id":"prb_1","target":"x","results":[{"nodeId":"fra-1","status":200,"latencyMs":41.5},{"nodeId":"nyc-2","status":503,"latencyMs":80},{"nodeId":"sin-1","error":"timeout"}]}`,
			[]cp{{"fra-1", up, 200, "", 41500 * time.Microsecond}, {"nyc-2", down, 503, customerapi.FailureStatus, 80 * ms}, {"sin-1", down, 0, customerapi.FailureTimeout, 0}}},
		{"404 is up", `{"results":[{"nodeId":"a","status":404}]}`, []cp{{"a", up, 404, "", 0}}},
		{"status as string", `{"results":[{"nodeId":"a","status":"502","latencyMs":"7"}]}`, []cp{{"a", down, 502, customerapi.FailureStatus, 7 * ms}}},
		{"status word is an error", `{"results":[{"nodeId":"a","status":"timeout"}]}`, []cp{{"a", down, 0, customerapi.FailureTimeout, 0}}},
		{"run state is not an error", `{"results":[{"nodeId":"a","status":"completed","statusCode":200}]}`, []cp{{"a", none, 0, "", 0}}},
		{"statusCode alias", `{"results":[{"node_id":"a","statusCode":301,"time":"12ms"}]}`, []cp{{"a", up, 301, "", 12 * ms}}},
		{"connection refused", `{"results":[{"nodeId":"a","error":"dial tcp 203.0.113.10:443: connect: connection refused"}]}`, []cp{{"a", down, 0, customerapi.FailureConnection, 0}}},
		{"tls", `{"results":[{"nodeId":"a","error":"tls: failed to verify certificate: x509: certificate is valid for b, not a"}]}`, []cp{{"a", down, 0, customerapi.FailureTLS, 0}}},
		{"dns", `{"results":[{"nodeId":"a","error":"lookup origin.test: no such host"}]}`, []cp{{"a", down, 0, customerapi.FailureDNS, 0}}},
		{"other error", `{"results":[{"nodeId":"a","error":"something odd"}]}`, []cp{{"a", down, 0, customerapi.FailureOther, 0}}},
		{"error object", `{"results":[{"nodeId":"a","error":{"code":"ETIMEDOUT","message":"timed out"}}]}`, []cp{{"a", down, 0, customerapi.FailureTimeout, 0}}},
		{"checkpoint trouble gives no vote", `{"results":[{"nodeId":"a","error":"node unavailable"}]}`, []cp{{"a", none, 0, customerapi.FailureCheckpoint, 0}}},
		{"nothing usable", `{"results":[{"nodeId":"a"},{"nodeId":"b","status":0},{"nodeId":"c","status":null}]}`, []cp{{"a", none, 0, "", 0}, {"b", none, 0, "", 0}, {"c", none, 0, "", 0}}},
		{"entry without id skipped", `{"results":[{"status":200},{"nodeId":"","status":200},"junk",7]}`, nil},
		{"wrapped in data", `{"data":{"results":[{"node":{"id":"x"},"status":200}]}}`, []cp{{"x", up, 200, "", 0}}},
		{"nodes key, numeric id", `{"nodes":[{"id":42,"status":500}]}`, []cp{{"42", down, 500, customerapi.FailureStatus, 0}}},
		{"keyed by node id", `{"results":{"b":{"status":200},"a":{"error":"timeout"}}}`, []cp{{"a", down, 0, customerapi.FailureTimeout, 0}, {"b", up, 200, "", 0}}},
		{"bare list", `[{"nodeId":"a","status":204}]`, []cp{{"a", up, 204, "", 0}}},
		{"nested result", `{"results":[{"nodeId":"a","result":{"statusCode":503}}]}`, []cp{{"a", down, 503, customerapi.FailureStatus, 0}}},
		{"attempts: any down is down", `{"results":[{"nodeId":"a","attempts":[{"status":200},{"error":"connection reset by peer"}]}]}`, []cp{{"a", down, 0, customerapi.FailureConnection, 0}}},
		{"duplicates merge to down", `{"results":[{"nodeId":"a","status":200},{"nodeId":"a","status":500}]}`, []cp{{"a", down, 500, customerapi.FailureStatus, 0}}},
		{"unknown fields ignored", `{"x":1,"results":[{"nodeId":"a","status":200,"extra":{"deep":[1,2]}}],"y":[null]}`, []cp{{"a", up, 200, "", 0}}},
		{"status out of range", `{"results":[{"nodeId":"a","status":999},{"nodeId":"b","status":-1}]}`, []cp{{"a", none, 0, "", 0}, {"b", none, 0, "", 0}}},
		{"no results", `{}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := customerapi.ParseProbeResponse([]byte(tt.body), "T")
			if err != nil {
				t.Fatal(err)
			}
			if got.Target != "T" || fmt.Sprint(flatten(got.Checkpoints)) != fmt.Sprint(tt.want) {
				t.Errorf("got  %v\nwant %v", flatten(got.Checkpoints), tt.want)
			}
		})
	}
}

func TestParseProbeResponseRejectsNonJSON(t *testing.T) {
	for _, body := range []string{"", "<html>", `"string"`, "42", "null"} {
		t.Run(body, func(t *testing.T) {
			if _, err := customerapi.ParseProbeResponse([]byte(body), "T"); !errors.Is(err, customerapi.ErrUnreadable) {
				t.Errorf("err = %v, want ErrUnreadable", err)
			}
		})
	}
}

func TestParseBatchProbeResponse(t *testing.T) {
	targets := []string{"http://a/h", "http://b/h"}
	tests := []struct {
		name string
		body string
		want [2]int // checkpoints per target
	}{
		{"by target", `{"results":[{"target":"http://b/h","results":[{"nodeId":"x","status":200}]},{"target":"http://a/h","results":[{"nodeId":"x","status":200},{"nodeId":"y","status":500}]}]}`, [2]int{2, 1}},
		{"url key and probes list", `{"probes":[{"url":"http://a/h","results":[{"nodeId":"x","status":200}]}]}`, [2]int{1, 0}},
		{"by position", `{"results":[{"results":[{"nodeId":"x","status":200}]},{"results":[]}]}`, [2]int{1, 0}},
		{"positional needs equal counts", `{"results":[{"results":[{"nodeId":"x","status":200}]}]}`, [2]int{0, 0}},
		{"keyed by target", `{"results":{"http://a/h":{"results":[{"nodeId":"x","status":200}]},"http://zzz":{}}}`, [2]int{1, 0}},
		{"unknown target ignored", `{"results":[{"target":"http://c/h","results":[{"nodeId":"x","status":200}]}]}`, [2]int{0, 0}},
		{"wrapped", `{"data":{"results":[{"target":"http://a/h","results":[{"nodeId":"x","status":200}]}]}}`, [2]int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := customerapi.ParseBatchProbeResponse([]byte(tt.body), targets)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Target != targets[0] || got[1].Target != targets[1] {
				t.Fatalf("targets = %+v", got)
			}
			if n := [2]int{len(got[0].Checkpoints), len(got[1].Checkpoints)}; n != tt.want {
				t.Errorf("checkpoints per target = %v, want %v", n, tt.want)
			}
		})
	}
}

func TestParseNodes(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"nodes key", `{"nodes":[{"id":"b","country":"DE"},{"id":"a","online":false}]}`, "a/false/ b/true/DE"},
		{"bare list, aliases", `[{"nodeId":"x","status":"offline"},{"node_id":"y"},{"name":"no id"},{"id":"x"}]`, "x/false/ y/true/"},
		{"data key", `{"data":[{"id":7}]}`, "7/true/"},
		{"nothing", `{"other":1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := customerapi.ParseNodes([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, n := range got {
				parts = append(parts, fmt.Sprintf("%s/%v/%s", n.ID, n.Online, n.Country))
			}
			if s := strings.Join(parts, " "); s != tt.want {
				t.Errorf("got %s, want %s", s, tt.want)
			}
		})
	}
}

// FuzzParseProbeResponse: the parser never panics, and every result it
// returns names a node and has a consistent outcome.
func FuzzParseProbeResponse(f *testing.F) {
	for _, s := range []string{
		`{"results":[{"nodeId":"fra-1","status":200,"latencyMs":41.5},{"nodeId":"sin-1","error":"timeout"}]}`,
		`{"data":{"results":{"a":{"status":"503"}}}}`,
		`[{"node":{"id":1},"attempts":[{"status":200},{"error":{"code":"x"}}],"result":{"statusCode":"500"}}]`,
		`{"results":[{"target":"http://a/h","results":[{"nodeId":"x","status":200}]}]}`,
		`{"nodes":[{"id":"a","time":"1e309"}]}`, `null`, `{"probe":{"probe":{"data":[]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(rs []customerapi.CheckpointResult) {
			for _, r := range rs {
				if r.NodeID == "" {
					t.Fatalf("result without node id: %+v", r)
				}
				switch r.Outcome {
				case customerapi.OutcomeUp:
					if r.Status < 100 || r.Status > 499 {
						t.Fatalf("up with status %d", r.Status)
					}
				case customerapi.OutcomeDown:
					if r.Failure == customerapi.FailureNone || r.Failure == customerapi.FailureCheckpoint {
						t.Fatalf("down without a failure kind: %+v", r)
					}
				}
				if r.Latency < 0 {
					t.Fatalf("negative latency %s", r.Latency)
				}
			}
		}
		res, _ := customerapi.ParseProbeResponse(body, "http://a/h")
		check(res.Checkpoints)
		batch, _ := customerapi.ParseBatchProbeResponse(body, []string{"http://a/h", "http://b/h"})
		if len(batch) != 2 {
			t.Fatalf("batch returned %d targets", len(batch))
		}
		for _, b := range batch {
			check(b.Checkpoints)
		}
		_, _ = customerapi.ParseNodes(body)
	})
}
