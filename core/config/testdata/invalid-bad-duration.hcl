control {
  round_interval = "30 seconds"
}

# want: 2:20: Invalid duration for round_interval; "30 seconds" is not a duration. Write a number with a unit, such as "30s", "5s" or "1m30s".
