source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
    unhealthy_threshold = 0
  }
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 5:27: Invalid unhealthy_threshold; unhealthy_threshold must be at least 1; got 0.
