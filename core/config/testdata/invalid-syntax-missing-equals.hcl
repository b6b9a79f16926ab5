control {
  round_interval "30s"
}

# want: 2:23: Invalid block definition; A block definition must have block content delimited by "{" and "}", starting on the same line as the block header.
