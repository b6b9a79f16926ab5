publish "dns" {
  listen     = "127.0.0.1:5353"
  zone       = "cdn.example.net."
  rrl_rate   = -1
  rrl_exempt = ["10.0.0.0/33"]
}

# want: 4:16: Invalid rrl_rate; rrl_rate must be at least 0; got -1.
# want: 5:16: Invalid rrl_exempt entry; rrl_exempt entries are IP addresses or prefixes, such as "192.0.2.0/24" or "2001:db8::/56"; got "10.0.0.0/33".
