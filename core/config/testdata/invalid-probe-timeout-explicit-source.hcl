source "direct" {
  plugin  = "vigil-source-direct"
  timeout = "10s"
}
site "www" {
  hostname = "www.example.com"
  health_check {
    timeout = "12s"
  }
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}

# want: 8:15: Probe timeout does not fit the source's deadline; Site "www" probes with timeout = 12s, but source "direct" has 10s a round (its timeout): a probe must end by 8.5s, which leaves time to spread the round's probes and send the votes back, or this site's origins never get a verdict from it. Lower timeout to 8.5s or less, or give source "direct" a longer timeout (or raise round_interval).
