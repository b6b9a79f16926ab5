sitе "www" {
}
source "direct" { plugin = "vigil-source-direct" }
control {
  round_interval = "30s"
}
contrl {
}

# want: 1:1: Unsupported block type; Blocks of type "sitе" are not expected here. Did you mean "site"?
# want: 7:1: Unsupported block type; Blocks of type "contrl" are not expected here. Did you mean "control"?
