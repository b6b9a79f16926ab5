control {
  sites_per_round = "many"
}

# want: 2:22: Unsuitable value type; Unsuitable value: a number is required
