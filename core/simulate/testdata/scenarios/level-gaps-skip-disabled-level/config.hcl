# Levels 1, 3 and 5. Level 3's only origin is disabled, so the level is
# unhealthy and the failover from 1 skips it for the healthy level 5; then
# automatic failback returns to 1 as soon as one of its origins is healthy.
source "direct" { plugin = "vigil-source-direct" }

site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "c1" {
    address = "http://127.0.0.1:18003"
    level   = 3
    enabled = false
  }
  origin "e1" {
    address = "http://127.0.0.1:18005"
    level   = 5
  }
}
