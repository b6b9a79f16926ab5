source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "https://www.example.com/"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 3:14: Invalid hostname; hostname "https://www.example.com/" is not a bare DNS name: write only the name, such as "www.example.com", with no scheme, port or path
