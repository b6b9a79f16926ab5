source "dnspup" {
  plugin = "vigil-source-dnspup"
  tally  = "sum"
}

# want: 3:12: Invalid tally; tally must be "own" (judge on this source's votes alone) or "carry" (judge on every vote cast so far this round); got "sum".
