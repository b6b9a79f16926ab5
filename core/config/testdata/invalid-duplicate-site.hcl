source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
site "www" {
  hostname = "www2.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 7:1: Duplicate site name; A site named "www" was already declared at testdata/invalid-duplicate-site.hcl:2,1-11. Site names must be unique: rename or remove one of them.
