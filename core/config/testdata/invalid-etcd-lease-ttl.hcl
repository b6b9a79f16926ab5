control {
  store "etcd" {
    endpoints = ["127.0.0.1:2379"]
    lease_ttl = "1500ms"
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

# want: 4:17: Invalid lease_ttl; lease_ttl must be whole seconds, at least "2s" (etcd leases count in seconds); got 1.5s.
