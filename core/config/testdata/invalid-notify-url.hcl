notify "webhook" "ops" {
  url = "hooks.example.com/vigil"
}

# want: 2:9: Invalid webhook url; url must be an absolute http or https URL, such as "https://hooks.example.com/vigil".
