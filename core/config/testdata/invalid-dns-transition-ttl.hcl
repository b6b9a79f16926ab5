publish "dns" {
  listen         = "127.0.0.1:5353"
  zone           = "cdn.example.net."
  ttl            = 30
  transition_ttl = 60
}

# want: 5:20: Invalid transition_ttl; transition_ttl (60) is the TTL while a site moves, and must not be longer than ttl (30); lower it, or remove it for half of ttl.
