notify "webhook" "ops" {
  url    = "https://hooks.example.com/vigil"
  format = "teams"
}

# want: 3:12: Invalid webhook format; format must be "json" or "slack"; got "teams".
