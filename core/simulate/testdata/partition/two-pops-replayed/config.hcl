control {
  round_interval  = "30s"
  sites_per_round = 500

  partition {
    label  = "pop"
    rounds = 3
  }
}

source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}

source "direct" {
  plugin = "vigil-source-direct"
}

site "www" {
  hostname = "www.example.com"

  health_check {
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }

  origin "a1" {
    address = "http://127.0.0.1:18001"
    level   = 1
  }

  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
