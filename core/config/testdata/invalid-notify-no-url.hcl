notify "webhook" "ops" {
  format = "json"
}

# want: 1:1: Missing webhook url; A webhook needs its URL: url = "https://hooks.example.com/vigil", or, for a URL that holds a secret, url_env = "VAR" (an environment variable) or url_file = "PATH".
