control {
  sites_per_round = "many"
}

# want: 2:21: Invalid sites_per_round; sites_per_round is a whole number of sites a round probes (at least 1), or "auto" to size each round from the time the last rounds took; got "many".
