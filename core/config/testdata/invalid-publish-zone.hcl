publish "dns" {
  listen = "127.0.0.1:5353"
  zone   = "cdn.example.net"
}

# want: 3:12: Invalid zone; zone must be a fully qualified DNS name ending in a dot, such as "cdn.example.net."; got "cdn.example.net".
