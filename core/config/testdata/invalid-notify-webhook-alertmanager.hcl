notify "webhook" "am" {
  url    = "http://127.0.0.1:9093/api/v2/alerts"
  format = "alertmanager"
}

# want: 3:12: Alertmanager is a notifier of its own; A webhook posts one body per event, which Alertmanager merges into earlier alerts and never resolves. Declare notify "alertmanager" "NAME" { urls = ["http://alertmanager:9093"] } instead: vigil then sends its alerts as states, resends them, and resolves them.
