package engine

// VoterLabelsLoaded reports whether the path-partition rule holds its
// first copy of the voters' labels, which it reads in the background.
// Tests wait on it instead of sleeping.
func (e *Engine) VoterLabelsLoaded() bool {
	e.mu.Lock()
	p := e.part
	e.mu.Unlock()
	return p != nil && p.labels.Load() != nil
}
