package config

// ForgetLastLoad makes the next LoadCached behave as in a new process: it
// reads the cache file rather than reusing the Config the last call
// returned.
func ForgetLastLoad() { lastLoad.remember("", nil, nil, nil) }

// LastReused is how many sites the last LoadCached that read changed
// files took again from the load before (0: it parsed them all).
func LastReused() int {
	lastLoad.mu.Lock()
	defer lastLoad.mu.Unlock()
	return lastLoad.reused
}
