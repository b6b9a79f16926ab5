control {
  history {
    rounds = 5000
  }
}

# want: 3:14: Invalid history rounds; rounds must be from 1 to 1024; got 5000.
