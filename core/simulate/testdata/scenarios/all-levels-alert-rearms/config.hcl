# One level only: when both origins are unhealthy there is nowhere to go.
# The alert is raised once, re-armed by a round that ends with the level not
# unhealthy, and raised again on the next incident.
source "direct" { plugin = "vigil-source-direct" }

site "solo" {
  hostname = "solo.example.com"
  health_check {
    unhealthy_threshold = 2
    healthy_threshold   = 1
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
