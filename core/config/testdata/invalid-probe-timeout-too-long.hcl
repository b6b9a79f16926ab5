source "direct" {
  plugin = "vigil-source-direct"
}
site "www" {
  hostname = "www.example.com"
  health_check {
    timeout = "28s"
  }
  origin "a1" { address = "http://127.0.0.1:1" }
  origin "a2" { address = "http://127.0.0.1:2" }
}

# want: 7:15: Probe timeout does not fit the source's deadline; Site "www" probes with timeout = 28s, but source "direct" has 28s a round (its share of round_interval): a probe must end by 26.5s, which leaves time to spread the round's probes and send the votes back, or this site's origins never get a verdict from it. Lower timeout to 26.5s or less, or give source "direct" a longer timeout (or raise round_interval).
