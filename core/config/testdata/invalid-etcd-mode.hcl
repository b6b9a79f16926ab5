control {
  store "etcd" {
    endpoints = ["http://127.0.0.1:2379"]
    mode      = "shard"
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

# want: 4:17: Invalid store mode; mode must be "active-standby" (one leader probes, the others stand by) or "sharded" (every instance probes its share of the sites); got "shard". Did you mean "sharded"?
