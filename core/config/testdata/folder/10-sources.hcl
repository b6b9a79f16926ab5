source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
  config {
    listen          = "127.0.0.1:8471"
    nodes_per_round = 3
  }
}
