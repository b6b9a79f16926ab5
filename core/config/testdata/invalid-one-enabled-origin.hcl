source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" {
    address = "http://127.0.0.1:18002"
    enabled = false
  }
}

# want: 2:1: Health checks need at least two enabled origins; Site "www" has health checks enabled but 1 enabled origin(s): with one origin there is nothing to switch to. Add an enabled origin, or set health_check { enabled = false }.
