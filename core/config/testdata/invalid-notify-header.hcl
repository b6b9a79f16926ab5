notify "webhook" "ops" {
  url        = "https://hooks.example.com/vigil"
  header_env = { "Content-Type" = "X" }
}

# want: 3:16: Invalid header name; header_env names header "Content-Type", which cannot be set: a header name is a word such as Authorization, and Content-Type, Content-Length and Host are vigil's.
