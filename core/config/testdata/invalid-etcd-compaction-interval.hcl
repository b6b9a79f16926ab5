control {
  store "etcd" {
    endpoints           = ["127.0.0.1:2379"]
    compaction_interval = "500ms"
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}

# want: 4:27: Invalid compaction_interval; compaction_interval must be at least "1s" ("5m" suits most clusters), or "0" to leave compaction to etcd (--auto-compaction-retention); got "500ms".
