source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  health_check {
    ca_file         = "no-such-ca.pem"
    tls_server_name = "not a name"
    headers         = { "Host" = "x", "Bad Name" = "y" }
    max_body        = "2GiB"
  }
  origin "a1" { address = "https://127.0.0.1:1" }
  origin "a2" { address = "https://127.0.0.1:2" }
}

# want: 5:23: Unusable ca_file; ca_file "no-such-ca.pem": open testdata/no-such-ca.pem: no such file or directory. Give the path of a file of PEM certificates (relative paths start at the configuration file's folder).
# want: 6:23: Invalid tls_server_name; tls_server_name "not a name" is not a bare DNS name: write only the name, such as "www.example.com", with no scheme, port or path
# want: 7:23: Invalid header name; headers: "Bad Name" is not a header name (letters, digits and !#$%&'*+-.^_`|~ only).
# want: 7:23: Header not allowed; headers: Host is set by the probe itself (Host is the site's hostname, User-Agent is user_agent) or frames the request; remove it.
# want: 8:23: Invalid max_body; max_body is the most bytes of a body a probe reads: a whole number of bytes or a size such as "256KiB" or "1MiB", from 1 byte to 1GiB.
