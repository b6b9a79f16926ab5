source "direct" { plugin = "vigil-source-direct" }

site "www" {
  hostname = "WWW.Example.com"
  sources  = ["direct", "node"]
  origin "a1" { address = "https://203.0.113.10" }
  origin "b1" {
    address = "https://backup.example.net:8443/"
    level   = 2
  }
}
