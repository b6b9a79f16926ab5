source "node" {
  plugin    = "vigil-source-node"
  min_votes = 0
}

# want: 3:15: Invalid min_votes; min_votes must be at least 1; got 0.
