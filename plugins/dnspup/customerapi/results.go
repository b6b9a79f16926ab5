package customerapi

// This file is the one place that knows what a probe answer looks like.
//
// dnspup does not publicly document the body of a successful POST /v1/probes
// or POST /v1/batch-probes. The shape assumed here is:
//
//	POST /v1/probes  → 200
//	{
//	  "id":     "prb_123",                       // ignored
//	  "target": "https://203.0.113.10/health",   // ignored for a single probe
//	  "results": [                               // one entry per checkpoint
//	    {"nodeId": "fra-1", "status": 200, "latencyMs": 41.5},
//	    {"nodeId": "nyc-2", "status": 503, "latencyMs": 80},
//	    {"nodeId": "sin-1", "error": "timeout"}
//	  ]
//	}
//
//	POST /v1/batch-probes → 200
//	{
//	  "results": [                               // one entry per target
//	    {"target": "https://203.0.113.10/health", "results": [ …as above… ]},
//	    {"target": "https://203.0.113.11/health", "results": [ … ]}
//	  ]
//	}
//
// The parser is tolerant on purpose:
//
//   - Unknown fields are ignored. A body wrapped as {"data": …} or
//     {"probe": …} is unwrapped.
//   - The per-checkpoint list may be called "results", "nodes",
//     "checkpoints" or "measurements", and may be an object keyed by node id
//     instead of a list. The batch list may be called "results", "probes",
//     "targets" or "items", or be an object keyed by target URL.
//   - A checkpoint's id is read from "nodeId", "node_id", "nodeID", "node",
//     "checkpoint", "checkpointId" or "id"; a string, a number, or an object
//     with an "id". An entry without an id is skipped (nobody to vote).
//   - The HTTP status is read from "status", "statusCode", "status_code",
//     "httpStatus" or "http_status", as a number or a numeric string. A
//     non-numeric status string other than a run state ("ok", "done",
//     "success", "completed", "finished") is taken as an error text
//     ("timeout", "failed", …).
//   - The error is read from "error", "err", "errorMessage", "error_message"
//     or "failure": a string, an object {"code", "message"}, or true.
//   - The latency is read from "latencyMs", "latency_ms", "timeMs", "time_ms",
//     "durationMs", "duration_ms", "rtt", "time" or "latency": milliseconds as
//     a number or numeric string, or a Go duration string ("41ms").
//   - A nested "result" or "http" object, and "attempts"/"samples" lists
//     (count > 1), are read as further samples of the same checkpoint.
//   - Batch entries are matched to the requested targets by their "target"
//     (or "url"); when no entry names its target and the counts agree, they
//     are matched by position.
//
// How a sample becomes an outcome (decisions.md, "Probe"):
//
//   - an error text: down, classed as timeout, tls, dns, connection or other
//     from the text ("timeout", "connection refused", "tls: …", "x509: …"),
//     except errors that are the checkpoint's own trouble ("node
//     unavailable", "node offline", "internal error", "not executed",
//     "skipped", "cancelled", "quota"): no vote;
//   - else a status of 500..599: down; 100..499: up;
//   - else (no status, no error): no vote.
//
// A checkpoint with several samples votes down if any is down, else up if
// any is up, else not at all.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Outcome is what one checkpoint saw of one target.
type Outcome int

const (
	// OutcomeNone: the checkpoint gave no usable answer; it does not vote.
	OutcomeNone Outcome = iota
	// OutcomeUp: a response with status below 500.
	OutcomeUp
	// OutcomeDown: a 5xx, timeout, connection, TLS or other probe failure.
	OutcomeDown
)

func (o Outcome) String() string {
	switch o {
	case OutcomeUp:
		return "up"
	case OutcomeDown:
		return "down"
	}
	return "none"
}

// Failure says why an outcome is down (or, for FailureCheckpoint, why there
// is none).
type Failure string

// Failure kinds.
const (
	FailureNone       Failure = ""
	FailureStatus     Failure = "status"     // a 5xx answer
	FailureTimeout    Failure = "timeout"    // no answer in time
	FailureConnection Failure = "connection" // refused, reset, unreachable
	FailureTLS        Failure = "tls"        // handshake or certificate
	FailureDNS        Failure = "dns"        // the target name did not resolve
	FailureOther      Failure = "other"      // any other error the checkpoint reported
	FailureCheckpoint Failure = "checkpoint" // the checkpoint's own trouble: no vote
)

// CheckpointResult is one checkpoint's view of one target.
type CheckpointResult struct {
	NodeID  string
	Outcome Outcome
	// Status is the HTTP status seen; 0 when none.
	Status int
	// Latency is as reported; 0 when unknown.
	Latency time.Duration
	Failure Failure
	// Detail is the checkpoint's error text, shortened; empty when none.
	Detail string
}

// TargetResult is every checkpoint's view of one target, in node id order.
type TargetResult struct {
	Target      string
	Checkpoints []CheckpointResult
}

// ErrUnreadable is returned (wrapped) when a 2xx body is not JSON at all.
var ErrUnreadable = errors.New("probe response is not a JSON object")

// ParseProbeResponse maps the body of a POST /v1/probes answer to
// per-checkpoint results for target.
func ParseProbeResponse(body []byte, target string) (TargetResult, error) {
	v, err := decodeLoose(body)
	if err != nil {
		return TargetResult{Target: target}, err
	}
	return TargetResult{Target: target, Checkpoints: checkpointsOf(unwrap(v))}, nil
}

// ParseBatchProbeResponse maps the body of a POST /v1/batch-probes answer to
// one TargetResult per requested target, in the order of targets. A target
// the answer does not mention has no checkpoints.
func ParseBatchProbeResponse(body []byte, targets []string) ([]TargetResult, error) {
	out := make([]TargetResult, len(targets))
	for i, t := range targets {
		out[i].Target = t
	}
	v, err := decodeLoose(body)
	if err != nil {
		return out, err
	}
	index := make(map[string]int, len(targets))
	for i, t := range targets {
		if _, dup := index[t]; !dup {
			index[t] = i
		}
	}
	root := unwrap(v)
	obj, _ := root.(map[string]any)
	var entries []any
	if arr, ok := root.([]any); ok {
		entries = arr
	}
	for _, k := range []string{"results", "probes", "targets", "items"} {
		if entries != nil {
			break
		}
		switch x := obj[k].(type) {
		case []any:
			entries = x
		case map[string]any: // keyed by target URL
			for _, t := range sortedKeys(x) {
				if i, ok := index[t]; ok {
					out[i].Checkpoints = mergeInto(out[i].Checkpoints, checkpointsOf(unwrap(x[t])))
				}
			}
			return out, nil
		}
	}
	var unnamed []any
	for _, e := range entries {
		m, ok := unwrap(e).(map[string]any)
		if !ok {
			continue
		}
		t, _ := firstString(m, "target", "url")
		if t == "" {
			unnamed = append(unnamed, m)
			continue
		}
		if i, ok := index[t]; ok {
			out[i].Checkpoints = mergeInto(out[i].Checkpoints, checkpointsOf(m))
		}
	}
	if len(unnamed) > 0 && len(unnamed) == len(entries) && len(entries) == len(targets) {
		for i, m := range unnamed {
			out[i].Checkpoints = checkpointsOf(m)
		}
	}
	return out, nil
}

func decodeLoose(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	switch v.(type) {
	case map[string]any, []any:
		return v, nil
	}
	return nil, ErrUnreadable
}

// unwrap strips {"data": …} and {"probe": …} wrappers.
func unwrap(v any) any {
	for range 4 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		inner, found := m["data"]
		if !found {
			inner, found = m["probe"]
		}
		if !found {
			return v
		}
		switch inner.(type) {
		case map[string]any, []any:
			v = inner
		default:
			return v
		}
	}
	return v
}

// checkpointsOf reads the per-checkpoint list of one target's entry.
func checkpointsOf(v any) []CheckpointResult {
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case map[string]any:
		for _, k := range []string{"results", "nodes", "checkpoints", "measurements"} {
			switch y := x[k].(type) {
			case []any:
				list = y
			case map[string]any: // keyed by node id
				for _, id := range sortedKeys(y) {
					m, ok := y[id].(map[string]any)
					if !ok {
						continue
					}
					if _, has := nodeID(m); !has {
						m = withID(m, id)
					}
					list = append(list, m)
				}
			}
			if list != nil {
				break
			}
		}
	}
	var out []CheckpointResult
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		id, ok := nodeID(m)
		if !ok {
			continue
		}
		r := judge(id, m)
		out = mergeInto(out, []CheckpointResult{r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

func withID(m map[string]any, id string) map[string]any {
	c := make(map[string]any, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	c["nodeId"] = id
	return c
}

// mergeInto adds rs to acc, merging samples of the same node: down beats up
// beats none.
func mergeInto(acc []CheckpointResult, rs []CheckpointResult) []CheckpointResult {
	for _, r := range rs {
		found := false
		for i := range acc {
			if acc[i].NodeID == r.NodeID {
				acc[i] = worse(acc[i], r)
				found = true
				break
			}
		}
		if !found {
			acc = append(acc, r)
		}
	}
	return acc
}

func worse(a, b CheckpointResult) CheckpointResult {
	rank := func(o Outcome) int {
		switch o {
		case OutcomeDown:
			return 2
		case OutcomeUp:
			return 1
		}
		return 0
	}
	if rank(b.Outcome) > rank(a.Outcome) {
		return b
	}
	return a
}

// judge reads one checkpoint entry (and its nested samples).
func judge(id string, m map[string]any) CheckpointResult {
	r := sample(id, m)
	for _, k := range []string{"result", "http"} {
		if inner, ok := m[k].(map[string]any); ok {
			r = worse(r, sample(id, inner))
		}
	}
	for _, k := range []string{"attempts", "samples"} {
		if arr, ok := m[k].([]any); ok {
			for _, a := range arr {
				if am, ok := a.(map[string]any); ok {
					r = worse(r, sample(id, am))
				}
			}
		}
	}
	return r
}

// sample reads the fields of one probe attempt.
func sample(id string, m map[string]any) CheckpointResult {
	r := CheckpointResult{NodeID: id}
	var errText string
	for _, k := range []string{"status", "statusCode", "status_code", "httpStatus", "http_status"} {
		v, ok := m[k]
		if !ok || v == nil {
			continue
		}
		if n, ok := number(v); ok {
			if n >= 100 && n <= 599 {
				r.Status = int(n)
			}
			break
		}
		if s, ok := v.(string); ok {
			if !runState(s) {
				errText = s
			}
			break
		}
	}
	for _, k := range []string{"error", "err", "errorMessage", "error_message", "failure"} {
		if t := errorText(m[k]); t != "" {
			errText = t
			break
		}
	}
	for _, k := range []string{"latencyMs", "latency_ms", "timeMs", "time_ms", "durationMs", "duration_ms", "rtt", "time", "latency"} {
		if d, ok := millis(m[k]); ok {
			r.Latency = d
			break
		}
	}
	switch {
	case errText != "":
		r.Detail = clean(errText)
		r.Failure = classify(errText)
		if r.Failure == FailureCheckpoint {
			r.Outcome = OutcomeNone
		} else {
			r.Outcome = OutcomeDown
		}
	case r.Status >= 500:
		r.Outcome, r.Failure = OutcomeDown, FailureStatus
	case r.Status >= 100:
		r.Outcome = OutcomeUp
	}
	return r
}

func runState(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "ok", "done", "success", "succeeded", "completed", "complete", "finished":
		return true
	}
	return false
}

func errorText(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case bool:
		if x {
			return "error"
		}
	case map[string]any:
		code, _ := firstString(x, "code", "type", "kind")
		msg, _ := firstString(x, "message", "detail", "error")
		switch {
		case code != "" && msg != "":
			return code + ": " + msg
		case code != "":
			return code
		case msg != "":
			return msg
		}
		if len(x) > 0 {
			return "error"
		}
	}
	return ""
}

// classify reads an error text reported by a checkpoint.
func classify(text string) Failure {
	t := strings.ToLower(text)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(t, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("node unavailable", "node offline", "node is offline", "internal error", "not executed", "skipped", "cancelled", "canceled", "quota"):
		return FailureCheckpoint
	case has("timeout", "timed out", "deadline exceeded"):
		return FailureTimeout
	case has("tls", "x509", "certificate", "ssl", "handshake"):
		return FailureTLS
	case has("no such host", "dns", "nxdomain", "resolve", "servfail"):
		return FailureDNS
	case has("refused", "reset", "unreachable", "no route", "connect", "eof", "broken pipe", "closed"):
		return FailureConnection
	}
	return FailureOther
}

func nodeID(m map[string]any) (string, bool) {
	for _, k := range []string{"nodeId", "node_id", "nodeID", "node", "checkpoint", "checkpointId", "id"} {
		switch x := m[k].(type) {
		case string:
			if s := strings.TrimSpace(x); s != "" {
				return s, true
			}
		case json.Number:
			return x.String(), true
		case map[string]any:
			if s, ok := nodeID(map[string]any{"id": x["id"]}); ok {
				return s, true
			}
		}
	}
	return "", false
}

func firstString(m map[string]any, keys ...string) (string, bool) {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s), true
		}
	}
	return "", false
}

func number(v any) (float64, bool) {
	var f float64
	var err error
	switch x := v.(type) {
	case json.Number:
		f, err = x.Float64()
	case float64:
		f = x
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(x), 64)
	default:
		return 0, false
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// millis reads a latency: a number of milliseconds, or a duration string.
func millis(v any) (time.Duration, bool) {
	if v == nil {
		return 0, false
	}
	if f, ok := number(v); ok {
		if f < 0 || f > 1e9 {
			return 0, false
		}
		return time.Duration(f * float64(time.Millisecond)), true
	}
	if s, ok := v.(string); ok {
		if d, err := time.ParseDuration(strings.TrimSpace(s)); err == nil && d >= 0 {
			return d, true
		}
	}
	return 0, false
}

// clean shortens an error text and drops control characters, so a
// checkpoint's text is safe to put in a log line.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
