source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "https://203.0.113.10/health" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 4:27: Invalid origin address; address "https://203.0.113.10/health" has a path, query or fragment; write only scheme, host and optional port, such as "https://203.0.113.10" or "http://origin.example.net:8080" (the probe path goes in health_check { path })
