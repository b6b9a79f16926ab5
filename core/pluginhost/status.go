package pluginhost

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilcdn/vigil/sdk"
)

// StatusTimeout bounds a Status call.
const StatusTimeout = 2 * time.Second

// Status asks the running plugin for its status (sdk.StatusReporter). It
// does not wait for a Vote in progress, and it never starts or restarts the
// plugin: a source that is not running reports an error.
// sdk.ErrNoStatus means the plugin has no status to report.
func (s *Source) Status(ctx context.Context) (sdk.Status, error) {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	if proc == nil {
		return sdk.Status{}, fmt.Errorf("source %q: the plugin is not running", s.spec.Name)
	}
	r, ok := proc.src.(sdk.StatusReporter)
	if !ok {
		return sdk.Status{}, sdk.ErrNoStatus
	}
	ctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	st, err := r.Status(ctx)
	if err != nil {
		return sdk.Status{}, fmt.Errorf("source %q: status: %w", s.spec.Name, err)
	}
	return st, nil
}
