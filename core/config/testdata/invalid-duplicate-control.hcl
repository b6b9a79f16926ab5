control {
  round_interval = "30s"
}
control {
  sites_per_round = 10
}

# want: 4:1: Duplicate control block; A control block was already declared at testdata/invalid-duplicate-control.hcl:1,1-8. Merge the two into one control block.
