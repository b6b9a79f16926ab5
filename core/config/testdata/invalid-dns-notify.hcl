publish "dns" {
  listen         = "127.0.0.1:5353"
  zone           = "cdn.example.net."
  allow_transfer = ["192.0.2.53"]
  notify         = ["192.0.2.53"]
}

# want: 5:20: Invalid notify entry; notify entries are a secondary's IP address and port, such as "192.0.2.53:53" or "[2001:db8::53]:53"; got "192.0.2.53".
