# An auto site pinned to level 2 by hand. Level 2 dies: the failover wraps to
# level 1 (reason failover), but the hold stays on, because only a manual
# switch to the top level clears it. So when level 1 dies and comes back, the
# site does not fail back by itself: it announces the level instead.
source "direct" { plugin = "vigil-source-direct" }

site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18002"
    level   = 2
  }
}
