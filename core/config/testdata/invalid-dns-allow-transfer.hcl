publish "dns" {
  listen         = "127.0.0.1:5353"
  zone           = "cdn.example.net."
  allow_transfer = ["192.0.2.53", "secondary.example.net"]
}

# want: 4:20: Invalid allow_transfer entry; allow_transfer entries are IP addresses or prefixes, such as "192.0.2.53" or "192.0.2.0/24"; got "secondary.example.net".
