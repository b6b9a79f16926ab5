site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 1:1: No vote sources; Site "www" has health checks enabled but no source block is declared, so nothing can vote. Declare a source, such as source "direct" { plugin = "vigil-source-direct" }.
