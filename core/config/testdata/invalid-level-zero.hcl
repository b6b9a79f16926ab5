source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" {
    address = "http://127.0.0.1:18001"
    level   = 0
  }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 6:15: Invalid level; level must be at least 1; got 0.
