# One source that needs three votes and a strict majority. Two votes are not
# enough, a 2-2 tie settles nothing, and rounds without a verdict keep the
# counters where they were.
source "quorum" {
  plugin    = "vigil-source-node"
  min_votes = 3
}

site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 2
    healthy_threshold   = 2
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18002"
    level   = 2
  }
}
