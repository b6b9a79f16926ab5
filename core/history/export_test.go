package history

// SetWriteAt replaces how the ring writes (to fail writes in tests).
func (r *Ring) SetWriteAt(f func(b []byte, off int64) (int, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeAt = f
}
