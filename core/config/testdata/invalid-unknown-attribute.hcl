source "direct" {
  plugin   = "vigil-source-direct"
  min_vote = 2
}

# want: 3:3: Unsupported argument; An argument named "min_vote" is not expected here. Did you mean "min_votes"?
