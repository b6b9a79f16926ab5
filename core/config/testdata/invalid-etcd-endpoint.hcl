control {
  store "etcd" {
    endpoints = ["127.0.0.1"]
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

# want: 3:17: Invalid etcd endpoint; endpoint "127.0.0.1" has no port: write host:port, such as "127.0.0.1:2379" or "https://etcd-1.example.net:2379"
