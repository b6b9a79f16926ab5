source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a1" { address = "http://127.0.0.1:18002" }
}

# want: 5:3: Duplicate origin name; Site "www" already has an origin named "a1" at testdata/invalid-duplicate-origin.hcl:4,3-14. Origin names must be unique within a site: rename or remove one of them.
