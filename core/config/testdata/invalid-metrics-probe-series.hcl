control {
  metrics {
    probe_series_sites = -1
  }
}

# want: 3:26: Invalid probe_series_sites; probe_series_sites must be 0 (no per-vote series) or more; got -1.
