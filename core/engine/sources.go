package engine

import (
	"context"
	"errors"

	"github.com/vigilcdn/vigil/api"
	"github.com/vigilcdn/vigil/core/readmodel"
	"github.com/vigilcdn/vigil/sdk"
)

type statusReporter interface {
	Status(ctx context.Context) (sdk.Status, error)
}

// SourceReports asks every source that reports a status
// (sdk.StatusReporter), concurrently and without waiting for a round in
// progress, and returns their answers in chain order. Sources with no
// status are left out. The API shows them through the read model
// (readmodel.SourceStatuses); the partition rule reads their voters'
// labels.
func (e *Engine) SourceReports(ctx context.Context) []readmodel.SourceReport {
	e.statsMu.Lock()
	sources := e.liveSources
	e.statsMu.Unlock()
	out := make([]readmodel.SourceReport, len(sources))
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
			out[i] = readmodel.SourceReport{Source: name, Status: st, Err: err}
		}(i, src.Name())
	}
	for range sources {
		<-done
	}
	var res []readmodel.SourceReport
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
