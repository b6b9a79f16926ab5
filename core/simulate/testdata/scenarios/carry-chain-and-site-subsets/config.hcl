# The three-source chain with carry, and sites that use a subset of it. The
# subset keeps the declaration order whatever order the site lists it in.
source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2
}
source "dnspup" {
  plugin    = "vigil-source-dnspup"
  min_votes = 2
  tally     = "carry"
}
source "direct" { plugin = "vigil-source-direct" }

site "full" {
  hostname = "full.example.com"
  origin "split-then-two-downs"  { address = "http://127.0.0.1:18001" }
  origin "split-then-split"      { address = "http://127.0.0.1:18002" }
  origin "node-settles"          { address = "http://127.0.0.1:18003" }
  origin "one-checkpoint-only"   { address = "http://127.0.0.1:18004" }
}

site "subset" {
  hostname = "subset.example.com"
  sources  = ["direct", "node"]
  origin "a1" { address = "http://127.0.0.1:18011" }
  origin "a2" { address = "http://127.0.0.1:18012" }
}
