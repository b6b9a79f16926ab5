# Manual failback with three levels: two levels recover in the same round and
# each gets its own notice, once. A manual switch to level 2 keeps the site
# manual; a manual switch to the top level returns it to its own setting.
source "direct" { plugin = "vigil-source-direct" }

site "www" {
  hostname = "www.example.com"
  failback = "manual"
  health_check {
    unhealthy_threshold = 1
    healthy_threshold   = 1
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "b1" {
    address = "http://127.0.0.1:18002"
    level   = 2
  }
  origin "c1" {
    address = "http://127.0.0.1:18003"
    level   = 3
  }
}
