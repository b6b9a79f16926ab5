control {
  history {
    rounds = 2000000
  }
}

# want: 3:14: Invalid history rounds; rounds must be from 1 to 1048576; got 2000000.
