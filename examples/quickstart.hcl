# vigil quickstart: one machine, no accounts. `make demo` runs it.
#
# Two levels of demo origins on loopback: a1 and a2 (level 1, the primary)
# and b1 (level 2, the backup). Fail the primaries with
#   bin/vigil-demo-origin fail 127.0.0.1:18001
#   bin/vigil-demo-origin fail 127.0.0.1:18002
# and watch `bin/vigil status www` switch to level 2 within three rounds.

control {
  round_interval  = "2s"
  sites_per_round = 500
  data_dir        = "data/quickstart"
  plugin_dir      = "bin"

  api {
    listen    = "127.0.0.1:8470"
    token_env = "VIGIL_TOKEN"
  }
}

# The control plane's own probe: one vote per origin.
source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "3s"
}

site "www" {
  hostname = "www.example.com"
  failback = "auto"

  health_check {
    path                = "/cdn-health"
    timeout             = "1s"
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }

  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
