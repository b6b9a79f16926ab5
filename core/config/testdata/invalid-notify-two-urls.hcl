notify "webhook" "ops" {
  url     = "https://hooks.example.com/vigil"
  url_env = "HOOK_URL"
}

# want: 1:1: Conflicting webhook url; Give one of url, url_env and url_file, not several.
