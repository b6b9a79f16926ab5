control {
  store "consul" {
    endpoints = ["127.0.0.1:8500"]
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

# want: 2:9: Unknown store kind; Store kind "consul" is not known; the kinds are "etcd". Remove the block to keep the embedded store in data_dir.
