source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "203.0.113.10" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 4:27: Invalid origin address; address "203.0.113.10" is not an absolute http or https URL; write a scheme and a host, such as "https://203.0.113.10" or "http://origin.example.net:8080"
