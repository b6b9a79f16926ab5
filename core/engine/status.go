package engine

import (
	"context"
	"errors"
	"sort"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/sdk"
)

// SourceStatus is what one source reports about itself
// (sdk.StatusReporter), such as the node gateway's nodes (package api).
type SourceStatus = api.SourceStatus

// NodeView is one item of a source's status, such as a node.
type NodeView = api.NodeView

type statusReporter interface {
	Status(ctx context.Context) (sdk.Status, error)
}

// SourceStatuses asks every source that reports a status, concurrently and
// without waiting for a round in progress. Sources with no status are left
// out.
func (e *Engine) SourceStatuses(ctx context.Context) []SourceStatus {
	e.statsMu.Lock()
	sources := e.liveSources
	e.statsMu.Unlock()
	out := make([]SourceStatus, len(sources))
	has := make([]bool, len(sources))
	done := make(chan int, len(sources))
	for i, src := range sources {
		r, ok := src.(statusReporter)
		if !ok {
			done <- i
			continue
		}
		go func(i int, name string) {
			defer func() { done <- i }()
			st, err := r.Status(ctx)
			if errors.Is(err, sdk.ErrNoStatus) {
				return
			}
			has[i] = true
			out[i] = SourceStatus{Source: name}
			if err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Summary = st.Summary
			for _, it := range st.Items {
				nv := NodeView{ID: it.Name, Source: name, State: it.State, Labels: it.Labels, Detail: it.Detail}
				if nv.Labels == nil {
					nv.Labels = map[string]string{}
				}
				if !it.LastSeen.IsZero() {
					t := it.LastSeen
					nv.LastSeen = &t
				}
				out[i].Items = append(out[i].Items, nv)
			}
			sort.Slice(out[i].Items, func(a, b int) bool { return out[i].Items[a].ID < out[i].Items[b].ID })
		}(i, src.Name())
	}
	for range sources {
		<-done
	}
	var res []SourceStatus
	for i := range out {
		if has[i] {
			res = append(res, out[i])
		}
	}
	return res
}

// pidder is implemented by sources that run a process.
type pidder interface{ PID() int }

// infoer is implemented by sources that know their plugin's name and
// version.
type infoer interface{ Info() sdk.Info }

// Sources lists the chain's sources in order with their plugin processes
// and counters (GET /v1/sources).
func (e *Engine) Sources() []api.SourceInfo {
	e.statsMu.Lock()
	sources := e.liveSources
	e.statsMu.Unlock()
	e.mu.Lock()
	cfg := e.cfg
	e.mu.Unlock()
	out := make([]api.SourceInfo, 0, len(sources))
	for i, s := range sources {
		si := api.SourceInfo{Name: s.Name()}
		if cfg != nil && i < len(cfg.Sources) && cfg.Sources[i].Name == si.Name {
			si.Plugin = cfg.Sources[i].Plugin
		}
		if p, ok := s.(pidder); ok {
			si.PID = p.PID()
		}
		if in, ok := s.(infoer); ok {
			info := in.Info()
			if info.Name != "" {
				si.Plugin = info.Name
			}
			si.Version = info.Version
			si.Protocol, si.SDKVersion, si.Capabilities = info.ProtocolVersion, info.SDKVersion, info.Capabilities
		}
		if st, ok := s.(statser); ok {
			x := st.Stats()
			si.Starts, si.Restarts, si.Crashes, si.Failures = x.Starts, x.Restarts, x.Crashes, x.Failures
			si.Unsupported = x.Unsupported
		}
		e.trouble.fill(&si)
		out = append(out, si)
	}
	return out
}
