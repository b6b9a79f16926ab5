source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "https://admin:hunter2@203.0.113.10" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 4:27: Invalid origin address; address "https://admin:xxxxx@203.0.113.10" contains credentials; remove the user:password@ part (probes send no credentials)
