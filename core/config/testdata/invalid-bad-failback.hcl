source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  failback = "never"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 4:14: Invalid failback; failback must be "auto" (switch back to a healthy higher level by itself) or "manual" (only announce it); got "never".
