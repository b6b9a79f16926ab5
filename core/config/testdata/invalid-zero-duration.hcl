source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "0s"
}

# want: 3:13: Invalid duration for timeout; timeout must be greater than zero; got "0s".
