source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  sources  = ["drect"]
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 4:14: Unknown source; sources names "drect", but no source block of that name is declared. Did you mean "direct"?
