package config

// ForgetLastLoad makes the next LoadCached behave as in a new process: it
// reads the cache file rather than reusing the Config the last call
// returned.
func ForgetLastLoad() { lastLoad.remember("", nil, nil) }
