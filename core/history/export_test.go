package history

// SetWriteAt replaces how the ring writes (to fail writes in tests).
func (r *Ring) SetWriteAt(f func(b []byte, off int64) (int, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeAt = f
}

// IndexAt is the offset of the index in a file of rounds rounds.
func IndexAt(rounds int) int64 { return newLayout(rounds, 1024).indexAt() }

// RoundTableAt is the offset of the round table.
func RoundTableAt() int64 { return newLayout(DefaultRounds, 1024).roundTableAt() }
