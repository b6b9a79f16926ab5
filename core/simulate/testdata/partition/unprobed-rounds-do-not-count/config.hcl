control {
  round_interval  = "30s"
  sites_per_round = 1

  partition {
    label  = "pop"
    rounds = 2
  }
}

source "node" {
  plugin = "vigil-source-node"
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

site "api" {
  hostname = "api.example.com"

  origin "c1" {
    address = "http://127.0.0.1:18004"
    level   = 1
  }

  origin "d1" {
    address = "http://127.0.0.1:18005"
    level   = 2
  }
}
