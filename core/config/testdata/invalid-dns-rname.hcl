publish "dns" {
  listen = "127.0.0.1:5353"
  zone   = "cdn.example.net."
  rname  = "hostmaster"
}

# want: 4:12: Invalid rname; rname must be a mailbox, such as "hostmaster@example.net", or a fully qualified name ending in a dot, such as "hostmaster.example.net."; got "hostmaster"
