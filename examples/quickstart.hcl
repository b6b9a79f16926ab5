# vigil quickstart: one machine, no accounts. `make demo` runs it with
# everything it needs (examples/demo.sh starts these beside the agent):
#   - demo origins a1, a2 (level 1, the primary) and b1 (level 2, the backup)
#     on 127.0.0.1:18001-18003: bin/vigil-demo-origin fail|recover ADDR
#   - two edge nodes (bin/vigil-node edge-1 and edge-2) attached to the node
#     gateway on 127.0.0.1:8471; edge-1 also proxies visitors on :8080
#   - a fake dnspup Customer API on 127.0.0.1:8475 (bin/vigil-fake-dnspup)
#     whose checkpoints probe the origins from this machine
# A port taken? `VIGIL_DEMO_API_PORT=9470 make demo` (and the other
# VIGIL_DEMO_* variables at the top of examples/demo.sh) runs the demo on a
# copy of this file with the addresses moved, data/demo/quickstart.hcl. The
# demo finds the addresses and paths below by setting and value (listen =
# "127.0.0.1:8470", ...): change one here, and change demo.sh too.
#
# The chain is the one vigil documents: the operator's nodes first (two must
# agree), then dnspup checkpoints whose votes are added to the node votes,
# then vigil's own probe for whatever is still unsettled.

control {
  round_interval  = "2s"
  sites_per_round = 500
  data_dir        = "../data/quickstart" # relative paths: from this file's folder
  plugin_dir      = "../bin"

  api {
    listen    = "127.0.0.1:8470"
    token_env = "VIGIL_TOKEN"
  }
}

source "node" {
  plugin    = "vigil-source-node"
  min_votes = 2 # two of up to three nodes, and a majority
  tally     = "own"
  # No timeout: each source gets its share of the round (here 600ms of
  # the 2s round, the rest being the engine's), so the chain always fits.
  env = ["VIGIL_NODE_TOKEN"] # vigil passes a plugin only what it lists
  config {
    listen          = "127.0.0.1:8471"
    token_env       = "VIGIL_NODE_TOKEN"
    nodes_per_round = 3
    online_timeout  = "6s"
  }
}

source "dnspup" {
  plugin    = "vigil-source-dnspup"
  min_votes = 2
  tally     = "carry" # one vote per checkpoint, added to the node votes
  env       = ["DNSPUP_API_KEY", "DNSPUP_API_SECRET"]
  config {
    api_base    = "http://127.0.0.1:8475" # the fake; the real one is https://api.dnspup.com
    checkpoints = ["ams-1", "fra-1"]
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

site "www" {
  hostname = "www.example.com"
  failback = "auto"

  health_check {
    path                = "/cdn-health"
    timeout             = "400ms" # must fit a 600ms source: see docs/probing.md
    unhealthy_threshold = 3
    healthy_threshold   = 2
  }

  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
  origin "b1" {
    address = "http://127.0.0.1:18003"
    level   = 2
  }
}
